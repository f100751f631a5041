package devserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// errExited reports that a server exited before it became ready.
var errExited = errors.New("exited before it became ready")

// process is a child started in its own process group, with its output captured.
type process struct {
	name string
	pid  int
	cmd  *exec.Cmd
	log  *logBuffer

	done    chan struct{} // closed when cmd.Wait has returned
	waitErr error         // cmd.Wait's result; read only after done is closed

	stopOnce sync.Once
	stopErr  error
}

// startProcess starts argv in dir with env (nil: this process's environment), in a new
// process group that gets SIGTERM if this process dies, and stops it when ctx is done.
func startProcess(ctx context.Context, name string, argv, env []string, dir string) (*process, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("devserver: start %s: %w", name, err)
	}
	log := newLogBuffer(MaxLogBytes)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Dir = dir
	cmd.Stdout = log
	cmd.Stderr = log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	// A grandchild that keeps the output pipe open must not block Wait for ever.
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("devserver: start %s: %w", name, err)
	}
	p := &process{name: name, pid: cmd.Process.Pid, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = p.stop() // Stop returns this stop's result to its caller
		case <-p.done:
		}
	}()
	return p, nil
}

// waitReady polls ready every 25 ms until it reports true while the process itself listens
// on port, the process exits (errExited), ctx is done or StartTimeout passes.
func (p *process) waitReady(ctx context.Context, port int, ready func(context.Context) bool) error {
	ctx, cancel := context.WithTimeout(ctx, StartTimeout)
	defer cancel()
	tick := time.NewTicker(25 * time.Millisecond)
	defer tick.Stop()
	for {
		// The answer may come from another process that took the port between FreePort and
		// our bind: the listening socket must be ours, and ours must still be alive.
		if ready(ctx) && listensOn(p.pid, port) {
			select {
			case <-p.done:
			default:
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("devserver: %s (pid %d) %w (%v); its output:\n%s",
				p.name, p.pid, errExited, p.waitErr, p.log.Tail(40))
		case <-ctx.Done():
			return fmt.Errorf("devserver: %s (pid %d) not ready: %w; its output:\n%s",
				p.name, p.pid, ctx.Err(), p.log.Tail(40))
		case <-tick.C:
		}
	}
}

// stop signals the process group with SIGTERM, then SIGKILL after StopGrace, and waits for
// the process to exit. Idempotent.
func (p *process) stop() error {
	p.stopOnce.Do(func() {
		select {
		case <-p.done:
			p.stopErr = fmt.Errorf("devserver: %s (pid %d) had exited before Stop: %v", p.name, p.pid, p.waitErr)
		default:
			_ = syscall.Kill(-p.pid, syscall.SIGTERM)
			select {
			case <-p.done:
			case <-time.After(StopGrace):
				_ = syscall.Kill(-p.pid, syscall.SIGKILL)
				<-p.done
			}
		}
		// Whatever else is left in the group (a child of the server) goes too.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	})
	return p.stopErr
}

// listensOn reports whether process pid has a socket listening on TCP port, from /proc.
// Where /proc/net/tcp cannot be read (not Linux) it reports true.
func listensOn(pid, port int) bool {
	inodes := map[string]bool{}
	found := false
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		found = true
		for _, line := range strings.Split(string(data), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: LISTEN
				continue
			}
			_, hexPort, ok := strings.Cut(f[1], ":")
			if n, err := strconv.ParseUint(hexPort, 16, 16); ok && err == nil && int(n) == port {
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if !found {
		return true
	}
	if len(inodes) == 0 {
		return false
	}
	fdDir := "/proc/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(fdDir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(fdDir + "/" + fd.Name()); err == nil && inodes[link] {
			return true
		}
	}
	return false
}

// logBuffer keeps the most recent output written to it, at most max bytes: when full it drops
// the oldest quarter at once, so that writes stay cheap. Safe for concurrent use.
type logBuffer struct {
	mu      sync.Mutex
	buf     []byte
	max     int
	dropped int64
}

func newLogBuffer(max int) *logBuffer { return &logBuffer{max: max} }

// Write appends p, dropping the oldest output when more than max bytes are kept.
func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		drop := len(b.buf) - b.max*3/4
		b.dropped += int64(drop)
		b.buf = append(b.buf[:0], b.buf[drop:]...)
	}
	return len(p), nil
}

// String returns the kept output, preceded by a note when older output was dropped.
func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dropped > 0 {
		return fmt.Sprintf("[... %d earlier bytes dropped ...]\n%s", b.dropped, b.buf)
	}
	return string(b.buf)
}

// Tail returns the last n lines of the kept output.
func (b *logBuffer) Tail(n int) string {
	s := strings.TrimRight(b.String(), "\n")
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
