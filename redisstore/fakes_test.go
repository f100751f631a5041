package redisstore

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// fakeServer is a RESP server on 127.0.0.1 that answers every command with
// what reply returns for it (raw RESP; "" for no answer at all), after
// refusing HELLO so that clients speak RESP2. It records the commands it
// received by lower-case name (and script, as counter does). Safe for
// concurrent use.
type fakeServer struct {
	ln    net.Listener
	reply func(cmd []string) string

	mu   sync.Mutex
	cmds []string
}

func startFake(t *testing.T, reply func(cmd []string) string) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln, reply: reply}
	var wg sync.WaitGroup
	var conns sync.Map
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(c, true)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				f.serve(c)
			}()
		}
	}()
	return f
}

func (f *fakeServer) addr() string { return f.ln.Addr().String() }

// received returns the names of the commands received so far, other than
// the connection's set-up (HELLO, CLIENT).
func (f *fakeServer) received() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.cmds...)
}

func (f *fakeServer) serve(c net.Conn) {
	r := bufio.NewReader(c)
	for {
		cmd, err := readCommand(r)
		if err != nil {
			return
		}
		name := strings.ToLower(cmd[0])
		var out string
		switch name {
		case "hello":
			out = "-ERR unknown command 'HELLO'\r\n"
		case "client", "select", "ping":
			out = "+OK\r\n"
		default:
			if (name == "evalsha" || name == "eval") && len(cmd) > 1 {
				name += " " + scriptNames[cmd[1]]
			}
			f.mu.Lock()
			f.cmds = append(f.cmds, name)
			f.mu.Unlock()
			out = f.reply(cmd)
		}
		if out == "" {
			continue // no answer: the client times out
		}
		if _, err := io.WriteString(c, out); err != nil {
			return
		}
	}
}

// readCommand reads one RESP array of bulk strings.
func readCommand(r *bufio.Reader) ([]string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return strings.Fields(line), nil // an inline command
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	cmd := make([]string, 0, n)
	for range n {
		head, err := r.ReadString('\n')
		if err != nil {
			return nil, err
		}
		size, err := strconv.Atoi(strings.TrimSpace(head[1:]))
		if err != nil {
			return nil, err
		}
		buf := make([]byte, size+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		cmd = append(cmd, string(buf[:size]))
	}
	return cmd, nil
}

// lossyProxy forwards TCP connections to a Redis server on 127.0.0.1. When
// armed, it forwards the next command that runs a script (EVALSHA or EVAL)
// and, once the server has answered, closes the client's connection instead
// of passing the answer on: a write applied by the server whose answer is
// lost. With keep, it passes the answer's first keep bytes on first, and
// with reset, it resets the connection instead of closing it: an answer
// cut short. Safe for concurrent use; set keep and reset before use.
type lossyProxy struct {
	ln       net.Listener
	upstream string
	armed    atomic.Bool
	dropped  atomic.Int32
	keep     int
	reset    bool
}

func startLossyProxy(t *testing.T, upstream string) *lossyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{ln: ln, upstream: upstream}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.relay(c)
			}()
		}
	}()
	return p
}

func (p *lossyProxy) addr() string { return p.ln.Addr().String() }

func (p *lossyProxy) relay(c net.Conn) {
	defer c.Close()
	up, err := net.Dial("tcp", p.upstream)
	if err != nil {
		return
	}
	defer up.Close()
	var drop atomic.Bool
	done := make(chan struct{})
	go func() { // server to client
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			n, err := up.Read(buf)
			if err != nil {
				return
			}
			if drop.Load() {
				p.dropped.Add(1)
				_, _ = c.Write(buf[:min(n, p.keep)])
				if tc, ok := c.(*net.TCPConn); ok && p.reset {
					_ = tc.SetLinger(0) // close sends RST
				}
				c.Close() // the answer is lost, or cut short
				return
			}
			if _, err := c.Write(buf[:n]); err != nil {
				return
			}
		}
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if err != nil {
			break
		}
		chunk := bytes.ToLower(buf[:n])
		if bytes.Contains(chunk, []byte("eval")) && p.armed.CompareAndSwap(true, false) {
			drop.Store(true)
		}
		if _, err := up.Write(buf[:n]); err != nil {
			break
		}
	}
	up.Close()
	<-done
}
