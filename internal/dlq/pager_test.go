package dlq_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem/internal/dlq"
)

// send sends n messages to url, in groups of 3 on a FIFO queue, and returns their ids.
func send(t *testing.T, c *sqs.Client, url string, n int, fifo bool) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for i := range n {
		in := &sqs.SendMessageInput{QueueUrl: aws.String(url), MessageBody: aws.String(fmt.Sprintf(`{"event_id":"evt_%d"}`, i)), MessageAttributes: attrs}
		if fifo {
			in.MessageGroupId = aws.String("group-" + strconv.Itoa(i%3))
		}
		out, err := c.SendMessage(t.Context(), in)
		if err != nil {
			t.Fatal(err)
		}
		ids[aws.ToString(out.MessageId)] = true
	}
	return ids
}

// A Pager returns every message of a queue larger than one receive once, keeping each
// hidden; Restore makes those it still holds visible again, and a later receive of one
// of them is Again.
func TestPagerPagesThroughAQueue(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, false)
	ids := send(t, c, q.DLQURL, 25, false)
	p, err := dlq.NewPager(c, q.DLQURL, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for receives := 0; ; receives++ {
		if receives > 20 {
			t.Fatal("not drained after 20 receives")
		}
		page, done, err := p.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Again) > 0 {
			t.Errorf("a message came again within its visibility timeout: %v", page.Again)
		}
		for _, m := range page.New {
			id := aws.ToString(m.MessageId)
			if got[id] || !ids[id] {
				t.Errorf("message %s returned twice, or not sent", id)
			}
			got[id] = true
		}
		if done {
			break
		}
	}
	if len(got) != len(ids) {
		t.Fatalf("paged through %d messages, want %d", len(got), len(ids))
	}
	if visible, inFlight := held(t, c, q.DLQURL); visible != 0 || inFlight != 25 {
		t.Errorf("while held: %d visible, %d in flight; want all in flight", visible, inFlight)
	}
	n, err := p.Restore(t.Context())
	if err != nil || n != 25 {
		t.Fatalf("Restore = %d, %v; want 25", n, err)
	}
	if visible, inFlight := held(t, c, q.DLQURL); visible != 25 || inFlight != 0 {
		t.Errorf("after Restore: %d visible, %d in flight; want all visible", visible, inFlight)
	}
	page, _, err := p.Next(t.Context())
	if err != nil || len(page.New) != 0 || len(page.Again) == 0 {
		t.Errorf("a receive after Restore: %d new, %d again, %v; want only messages seen before", len(page.New), len(page.Again), err)
	}
}

// A caller that moves what it receives pages through a FIFO queue too, whose receives
// return no more of a message group while one of its messages is held; what it
// deleted and forgot, Restore leaves alone.
func TestPagerMovesAFIFOQueue(t *testing.T) {
	t.Parallel()
	c := sqsClient(t)
	q := queues(t, c, true)
	ids := send(t, c, q.DLQURL, 12, true)
	p, err := dlq.NewPager(c, q.DLQURL, 60*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	moved := 0
	for done := false; !done; {
		var page dlq.Page
		if page, done, err = p.Next(t.Context()); err != nil {
			t.Fatal(err)
		}
		for _, m := range page.New {
			if err := dlq.Move(t.Context(), c, m, q.DLQURL, q.URL); err != nil {
				t.Fatal(err)
			}
			p.Forget(m)
			moved++
		}
		if moved > len(ids) {
			t.Fatalf("moved %d messages of %d", moved, len(ids))
		}
	}
	if moved != len(ids) {
		t.Errorf("moved %d messages, want %d", moved, len(ids))
	}
	if n, err := p.Restore(t.Context()); err != nil || n != 0 {
		t.Errorf("Restore after moving everything = %d, %v; want 0", n, err)
	}
	if got := receiveAll(t, c, q.URL); len(got) != len(ids) {
		t.Errorf("the source queue holds %d messages, want %d", len(got), len(ids))
	}
}

func TestPagerRefusesBadVisibility(t *testing.T) {
	t.Parallel()
	for _, d := range []time.Duration{0, 500 * time.Millisecond, 1500 * time.Millisecond, 13 * time.Hour} {
		if _, err := dlq.NewPager(nil, "http://127.0.0.1:1/q", d); err == nil {
			t.Errorf("NewPager with visibility %v: no error", d)
		}
	}
}
