package main

import (
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// processCPU returns this process's user+system CPU time (all threads).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// clockTicks is the unit of /proc/PID/stat's utime and stime. Linux has
// fixed USER_HZ at 100 on every architecture Go supports.
const clockTicks = 100

// pidCPU returns the user+system CPU time of process pid (all its threads)
// from /proc/PID/stat, at 10 ms resolution.
func pidCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: bad utime/stime %q %q", pid, f[11], f[12])
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// percentile returns the q-quantile (0 < q <= 1) of sorted durations by the
// nearest-rank method.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// quantiles summarise a latency distribution, in milliseconds: the box plots
// of the charts (whiskers p1 and p99, box p25 to p75, line at p50).
type quantiles struct {
	P1  float64 `json:"p1"`
	P25 float64 `json:"p25"`
	P50 float64 `json:"p50"`
	P75 float64 `json:"p75"`
	P99 float64 `json:"p99"`
}

// latencyQuantiles returns the quantiles of sorted latencies.
func latencyQuantiles(sorted []time.Duration) quantiles {
	q := func(p float64) float64 { return round(ms(percentile(sorted, p)), 3) }
	return quantiles{P1: q(0.01), P25: q(0.25), P50: q(0.50), P75: q(0.75), P99: q(0.99)}
}

// medianQuantiles returns each quantile's median over runs; nil for none.
func medianQuantiles(runs []quantiles) *quantiles {
	if len(runs) == 0 {
		return nil
	}
	pick := func(get func(quantiles) float64) float64 {
		xs := make([]float64, len(runs))
		for i, r := range runs {
			xs[i] = get(r)
		}
		return round(median(xs), 3)
	}
	return &quantiles{
		P1:  pick(func(q quantiles) float64 { return q.P1 }),
		P25: pick(func(q quantiles) float64 { return q.P25 }),
		P50: pick(func(q quantiles) float64 { return q.P50 }),
		P75: pick(func(q quantiles) float64 { return q.P75 }),
		P99: pick(func(q quantiles) float64 { return q.P99 }),
	}
}

// median returns the median of xs (the mean of the middle two for an even
// count), or 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// round rounds x to d decimal places, for readable JSON.
func round(x float64, d int) float64 {
	p := math.Pow(10, float64(d))
	return math.Round(x*p) / p
}
