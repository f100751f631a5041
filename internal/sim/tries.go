package sim

import (
	"context"
	"time"

	"github.com/idemgo/idem/core"
)

// try is one execution of a handler.
type try struct {
	id      int64
	c       *call
	start   time.Duration
	overrun bool          // it ignores its context and may outlive any lease
	heedEnd time.Duration // when it would have ended had it heeded its context
}

// tryClass is what a handler try returned.
type tryClass uint8

const (
	tryNone tryClass = iota
	trySuccess
	tryTransient
	tryPermanent
	tryOrdinary // an error no mark and no classifier knows
	tryCtx      // the context was done: the handler returned its error
	tryNoRecord // the handler asked to leave no record (core.MarkNoRecord)
)

// startTry registers a handler try and checks NoOverlap, HandlerContext
// and Attempts (the executions of a key in a record lifetime, a call's
// tries being one, and the tries of a call). A try that overran past the
// end a heeding try would have had is no longer a lease holder: a try may
// start beside it, but, if its lease was renewed, not while its context is
// live.
func (s *simulation) startTry(c *call, ctx context.Context) *try {
	ks := c.ks
	s.stats.Tries++
	s.tryN++
	tr := &try{id: s.tryN, c: c, start: s.now}
	s.checkExecution(c)
	for _, o := range ks.open {
		s.checkBeside(tr, o)
	}
	ks.open = append(ks.open, tr)
	c.try = tr
	c.tries++
	if c.tries > 1 {
		s.stats.NextTries++
		if c.rn != nil {
			s.stats.RenewedNextTries++
		}
	}
	if perCall := ks.sv.attemptsPerCall(); c.tries > perCall {
		s.violate(Attempts, ks, "try %d of delivery %d is its call's try %d; WithRetry allows %d; store holds %s",
			tr.id, c.d.id, c.tries, perCall, s.curString(ks))
	}
	if c.execLife != ks.life {
		c.execLife = ks.life
		ks.lifeExecs++
	}
	if maxExecs := ks.sv.maxAttempts(); ks.lifeExecs > maxExecs {
		s.violate(Attempts, ks, "try %d of delivery %d is in execution %d of the key in this record lifetime (begun at %s); max attempts is %d; store holds %s",
			tr.id, c.d.id, ks.lifeExecs, s.fmtRel(ks.lifeStart), maxExecs, s.curString(ks))
	}
	s.hist(c, hTryStart, core.Record{}, nil)
	return tr
}

// checkBeside checks try tr, starting, against o, running.
func (s *simulation) checkBeside(tr, o *try) {
	ks, c := tr.c.ks, tr.c
	if o.c.rn != nil && o.c.ctxErr() == nil {
		s.violate(HandlerContext, ks, "try %d of delivery %d started while try %d of delivery %d (started at %s, lease renewed until %s) runs with a live context; store holds %s",
			tr.id, c.d.id, o.id, o.c.d.id, s.fmtRel(o.start), s.fmtAbs(o.c.held), s.curString(ks))
	}
	if o.overrun && s.now > o.heedEnd {
		s.stats.OverrunOverlaps++
		return
	}
	if o.c.ctxErr() == nil {
		s.violate(HandlerContext, ks, "try %d of delivery %d started while try %d of delivery %d (started at %s) runs with a live context; store holds %s",
			tr.id, c.d.id, o.id, o.c.d.id, s.fmtRel(o.start), s.curString(ks))
	}
	s.violate(NoOverlap, ks, "try %d of delivery %d started while try %d of delivery %d (started at %s, %s ago) is still running; store holds %s",
		tr.id, c.d.id, o.id, o.c.d.id, s.fmtRel(o.start), s.now-o.start, s.curString(ks))
}

// endTry closes the call's running try.
func (s *simulation) endTry(c *call) {
	tr := c.try
	if tr == nil {
		return
	}
	ks := c.ks
	for i, o := range ks.open {
		if o == tr {
			ks.open = append(ks.open[:i], ks.open[i+1:]...)
			break
		}
	}
	c.try, c.rn = nil, nil
	s.hist(c, hTryEnd, core.Record{}, nil)
}
