package storetest

import (
	"fmt"
	"sync"
)

// Fault is what happens to one request of a store at its transport (the
// HTTP client, the network connection, the driver). The zero value is
// NoFault.
type Fault int

const (
	// NoFault: the request is sent and answered normally.
	NoFault Fault = iota
	// FailBefore: the request fails before it reaches the server (a refused
	// or failed connection). Nothing is applied; the store returns a
	// transient error.
	FailBefore
	// AnswerLost: the server applies the request, then its answer is lost
	// (a timeout or a connection reset while reading it). The store either
	// recognises its own write (core.SameWrite) or returns a transient
	// error; for a read, it returns a transient error.
	AnswerLost
	// Throttled: the server refuses the request for capacity, in the shape
	// the real server uses (DynamoDB: HTTP 400 with
	// ProvisionedThroughputExceededException). Nothing is applied; the
	// store returns a transient error.
	Throttled
	// TimedOut: the request times out without being applied (the server
	// never answers: the transport fails it with a timeout error, at once
	// or at the deadline of the request's context). The store returns a
	// transient error.
	TimedOut
)

// String returns the fault's name, as the subtests of RunFaults use it.
func (f Fault) String() string {
	switch f {
	case NoFault:
		return "NoFault"
	case FailBefore:
		return "FailBefore"
	case AnswerLost:
		return "AnswerLost"
	case Throttled:
		return "Throttled"
	case TimedOut:
		return "TimedOut"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Op is the kind of a store request, as a transport hook tells it to
// Faults.Next: a read (DynamoDB's GetItem) or a write (PutItem, UpdateItem,
// DeleteItem). Requests that are neither (creating a table) need not ask.
type Op int

const (
	// Read is a request that changes nothing.
	Read Op = iota
	// Write is a request that may change a record.
	Write
)

// String returns "read" or "write".
func (op Op) String() string {
	if op == Write {
		return "write"
	}
	return "read"
}

// Faults is a script of faults that a store's transport consults once per
// request, with Next. RunFaults writes the script: Set for the next requests
// of a kind, Always for all of them until Clear. A nil *Faults injects
// nothing. Faults is safe for concurrent use (mu guards every field); its
// zero value injects nothing.
type Faults struct {
	mu       sync.Mutex
	next     [2][]Fault // by Op: the faults of the next requests, in order
	always   [2]Fault   // by Op: the fault of every request once next is used up
	injected [2]int     // by Op: faults other than NoFault handed out
}

func (op Op) index() int {
	if op == Write {
		return 1
	}
	return 0
}

// Next returns the fault of the next request of op and consumes it: the
// first of the faults Set for op, or else the fault Always gives for op, or
// else NoFault. A transport hook calls it once per request, before sending.
func (f *Faults) Next(op Op) Fault {
	if f == nil {
		return NoFault
	}
	i := op.index()
	f.mu.Lock()
	defer f.mu.Unlock()
	fault := f.always[i]
	if len(f.next[i]) > 0 {
		fault, f.next[i] = f.next[i][0], f.next[i][1:]
	}
	if fault != NoFault {
		f.injected[i]++
	}
	return fault
}

// Set makes the next len(seq) requests of op get the faults of seq, in order,
// replacing the faults Set before for op. Requests after them get what Always
// gives.
func (f *Faults) Set(op Op, seq ...Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next[op.index()] = append([]Fault(nil), seq...)
}

// Always makes every request of op get fault, once the faults Set for op are
// used up, until Clear (or Always(op, NoFault)).
func (f *Faults) Always(op Op, fault Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.always[op.index()] = fault
}

// Clear removes every fault of the script: from now on, requests get NoFault.
func (f *Faults) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.next = [2][]Fault{}
	f.always = [2]Fault{}
}

// Pending returns the number of faults Set for op that no request has
// consumed yet.
func (f *Faults) Pending(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.next[op.index()])
}

// Injected returns the number of faults other than NoFault that Next has
// handed out for op.
func (f *Faults) Injected(op Op) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected[op.index()]
}
