package capacity

import "math"

// Tally sums the charges of one operation's calls.
type Tally struct {
	// Calls counts the calls.
	Calls int64 `json:"calls"`
	// Read and Write are the units charged: the server's report where it
	// reported one and reports are trusted, else the computed units.
	Read  float64 `json:"read_units"`
	Write float64 `json:"write_units"`
	// ComputedRead and ComputedWrite are the computed units of every call.
	ComputedRead  float64 `json:"computed_read_units"`
	ComputedWrite float64 `json:"computed_write_units"`
	// Reported counts the calls whose units are the server's report;
	// Mismatches, those whose report differs from the computed units.
	Reported   int64 `json:"reported_calls"`
	Mismatches int64 `json:"mismatches"`
	// ConditionFailed counts the calls whose condition failed; Approximate,
	// those whose computed units are approximate (Charge.Approximate).
	ConditionFailed int64 `json:"condition_failed"`
	Approximate     int64 `json:"approximate"`
}

// Add adds a charge; trust says whether the server's reports are the
// figures charged.
func (t *Tally) Add(c Charge, trust bool) {
	t.Calls++
	t.ComputedRead += c.Read
	t.ComputedWrite += c.Write
	read, write := c.Read, c.Write
	if trust && c.HasReport {
		t.Reported++
		if math.Abs(c.Reported-c.Units()) > 1e-9 {
			t.Mismatches++
		}
		if isWrite(c.Op) {
			write = c.Reported
		} else {
			read = c.Reported
		}
	}
	t.Read += read
	t.Write += write
	if c.ConditionFailed {
		t.ConditionFailed++
	}
	if c.Approximate {
		t.Approximate++
	}
}

// Sub returns t - u.
func (t Tally) Sub(u Tally) Tally {
	return Tally{Calls: t.Calls - u.Calls, Read: t.Read - u.Read, Write: t.Write - u.Write,
		ComputedRead: t.ComputedRead - u.ComputedRead, ComputedWrite: t.ComputedWrite - u.ComputedWrite,
		Reported: t.Reported - u.Reported, Mismatches: t.Mismatches - u.Mismatches,
		ConditionFailed: t.ConditionFailed - u.ConditionFailed, Approximate: t.Approximate - u.Approximate}
}

// Totals are tallies by operation.
type Totals map[string]Tally

// Add adds a charge to its operation's tally.
func (ts Totals) Add(c Charge, trust bool) {
	t := ts[c.Op]
	t.Add(c, trust)
	ts[c.Op] = t
}

// Sub returns ts - before, by operation, without operations of no calls.
func (ts Totals) Sub(before Totals) Totals {
	out := Totals{}
	for op, t := range ts {
		if d := t.Sub(before[op]); d.Calls != 0 {
			out[op] = d
		}
	}
	return out
}

// Sum returns the tally of every operation together.
func (ts Totals) Sum() Tally {
	var s Tally
	for _, t := range ts {
		s.Calls += t.Calls
		s.Read += t.Read
		s.Write += t.Write
		s.ComputedRead += t.ComputedRead
		s.ComputedWrite += t.ComputedWrite
		s.Reported += t.Reported
		s.Mismatches += t.Mismatches
		s.ConditionFailed += t.ConditionFailed
		s.Approximate += t.Approximate
	}
	return s
}
