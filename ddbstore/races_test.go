package ddbstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
)

// Settings of TestReserveRaceRounds. Measured on dynalite on 2 cores, 200
// rounds under -race: 23 s when nothing else runs, 35 to 80 s beside other
// test packages; -race makes little difference, the server is the
// bottleneck (12,800 PutItem and 12,600 GetItem, since dynalite does not
// return ALL_OLD).
const (
	racers     = 64
	raceRounds = 200
)

// TestReserveRaceRounds: in each round, racers goroutines reserve one new key
// at once through one store; exactly one wins, and every other gets a
// *idem.ConflictError holding the winner's token (none lost, none
// confused). The SDK does not retry (RetryMaxAttempts 1).
func TestReserveRaceRounds(t *testing.T) {
	heavy(t)
	f := newFixture(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Second)
	start := time.Now()
	for round := range raceRounds {
		key := fmt.Sprintf("race:round:%d", round)
		errs := make([]error, racers)
		var wg sync.WaitGroup
		gate := make(chan struct{})
		for i := range racers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := core.Reserve(key, fp, fmt.Sprintf("tok-%d-%d", round, i), nil, now, now.Add(time.Minute), time.Hour)
				<-gate
				errs[i] = f.store.Reserve(ctx, rec, nil, now)
			}()
		}
		close(gate)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				if winner >= 0 {
					t.Fatalf("round %d: racers %d and %d both won", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no winner; first error: %v", round, errs[0])
		}
		want := fmt.Sprintf("tok-%d-%d", round, winner)
		for i, err := range errs {
			if i == winner {
				continue
			}
			var ce *idem.ConflictError
			if !errors.As(err, &ce) || ce.Existing.LeaseToken != want {
				t.Fatalf("round %d: racer %d got %v, want a conflict holding %s", round, i, err, want)
			}
		}
	}
	d := time.Since(start)
	t.Logf("%d rounds × %d racers in %v (%v per round); %d PutItem, %d GetItem",
		raceRounds, racers, d.Round(time.Millisecond), (d / raceRounds).Round(time.Microsecond), f.rec.count("PutItem"), f.rec.count("GetItem"))
}

// Settings of TestProcesses.
const (
	workerProcesses = 4
	workerKeys      = 100
)

// TestProcesses runs several OS processes (ddbstore/internal/worker), each
// an idem.Runner over its own client and store on one table, through the
// same keys in different orders. Each handler execution increments a counter
// in a second table; every key's counter must end at exactly 1.
func TestProcesses(t *testing.T) {
	heavy(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "worker")
	build := exec.Command("go", "build", "-o", bin, "./internal/worker")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./internal/worker: %v\n%s", err, out)
	}
	f := newFixture(t)
	effects, _ := newTable(t, f.client)

	start := time.Now()
	startAt := start.Add(500 * time.Millisecond) // all workers begin together
	type summary struct {
		Executed, Replayed, InProgress, Transient int
	}
	sums := make([]summary, workerProcesses)
	var wg sync.WaitGroup
	errs := make(chan error, workerProcesses)
	for p := range workerProcesses {
		cmd := exec.Command(bin, "-table", f.table, "-effects", effects, "-keys", strconv.Itoa(workerKeys),
			"-seed", strconv.Itoa(p+1), "-start", strconv.FormatInt(startAt.UnixMilli(), 10))
		cmd.Env = os.Environ()
		cmd.Stderr = &testWriter{t: t, prefix: fmt.Sprintf("worker %d: ", p)}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if err := json.Unmarshal(sc.Bytes(), &sums[p]); err != nil {
					errs <- fmt.Errorf("worker %d: %q: %v", p, sc.Text(), err)
				}
			}
			if err := cmd.Wait(); err != nil {
				errs <- fmt.Errorf("worker %d: %v", p, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	executed := 0
	for p, s := range sums {
		t.Logf("worker %d: %+v", p, s)
		executed += s.Executed
	}
	if executed != workerKeys {
		t.Errorf("workers report %d executions, want %d", executed, workerKeys)
	}

	counts := map[string]int{}
	var startKey map[string]types.AttributeValue
	for {
		page, err := f.client.Scan(context.Background(), &dynamodb.ScanInput{TableName: aws.String(effects), ConsistentRead: aws.Bool(true), ExclusiveStartKey: startKey})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			k := it["pk"].(*types.AttributeValueMemberS).Value
			n, _ := strconv.Atoi(it["n"].(*types.AttributeValueMemberN).Value)
			counts[k] = n
		}
		if len(page.LastEvaluatedKey) == 0 {
			break
		}
		startKey = page.LastEvaluatedKey
	}
	if len(counts) != workerKeys {
		t.Errorf("%d keys have side effects, want %d", len(counts), workerKeys)
	}
	for k, n := range counts {
		if n != 1 {
			t.Errorf("key %s: side effect happened %d times", k, n)
		}
	}
	t.Logf("%d processes × %d keys in %v", workerProcesses, workerKeys, time.Since(start).Round(time.Millisecond))
}

// testWriter logs what a subprocess writes.
type testWriter struct {
	t      *testing.T
	prefix string
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s%s", w.prefix, p)
	return len(p), nil
}
