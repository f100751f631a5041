package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/dlq"
	"github.com/idemgo/idem/internal/esm"
)

// script is one run of the scripted sequence: its printer and what it checks.
type script struct {
	*stack
	ctx    context.Context
	step   int
	poller *esm.Poller
	bad    []string // what did not go as expected
}

// say prints the next step's title.
func (s *script) say(format string, a ...any) {
	s.step++
	fmt.Fprintf(s.out, "step %d: %s\n", s.step, fmt.Sprintf(format, a...))
}

// show prints a line of a step's outcome, indented.
func (s *script) show(format string, a ...any) {
	line := fmt.Sprintf(format, a...)
	if line == "" {
		fmt.Fprintln(s.out)
		return
	}
	fmt.Fprintf(s.out, "        %s\n", line)
}

// expect records an unexpected outcome when ok is false.
func (s *script) expect(ok bool, format string, a ...any) {
	if !ok {
		s.bad = append(s.bad, fmt.Sprintf(format, a...))
	}
}

// script runs the scripted sequence against the API at base and prints each step and a
// summary.
func (st *stack) script(ctx context.Context, base string) error {
	p, err := st.newPoller(ctx, nil)
	if err != nil {
		return err
	}
	s := &script{stack: st, ctx: ctx, poller: p}
	if err := s.orders(base); err != nil {
		return err
	}
	if err := s.consume(); err != nil {
		return err
	}
	if err := s.poison(); err != nil {
		return err
	}
	return s.summary()
}

// orders runs the API steps.
func (s *script) orders(base string) error {
	key := "demo-" + orders.NewID("")
	order := `{"customer_id":"c-42","items":[{"sku":"book","qty":2,"price_cents":1250}]}`
	retry := `{ "items": [ {"price_cents": 1250, "qty": 2, "sku": "book"} ], "customer_id": "c-42" }`
	other := `{"customer_id":"c-42","items":[{"sku":"pen","qty":1,"price_cents":99}]}`
	var answers [3]answer
	for i, step := range []struct{ title, body string }{
		{"POST /orders with a new Idempotency-Key", order},
		{"the client retries: same key, same order (keys reordered, spaces added)", retry},
		{"the same key with another order", other},
	} {
		s.say("%s", step.title)
		a, err := post(s.ctx, base+"/orders", key, step.body)
		if err != nil {
			return err
		}
		answers[i] = a
		same := ""
		if i == 1 {
			same = fmt.Sprintf(" (same order: %s)", yesNo(a.orderID != "" && a.orderID == answers[0].orderID))
		}
		s.show("-> %s%s", a, same)
	}
	s.expect(answers[0].status == 201 && answers[1].status == 201 && answers[1].replayed == "true" &&
		answers[1].orderID == answers[0].orderID && answers[2].status == 422, "the API's answers")
	nOrders, err := s.count(s.ctx, ordersTable)
	if err != nil {
		return err
	}
	msgs, err := s.queueHolds(s.q.URL)
	if err != nil {
		return err
	}
	s.show("orders in the table: %d; messages in %s: %d", nOrders, queueName, msgs)
	s.expect(nOrders == 1 && msgs == 1, "one order and one message")
	return nil
}

// consume runs the consumer steps: the message consumed, then a duplicate publish of it.
func (s *script) consume() error {
	s.say("the event source mapping polls %s and invokes orders-consumer", queueName)
	var body string
	if err := s.pollBatches(1, func(b esm.Batch) bool {
		if len(b.Deleted) == 1 {
			body = b.Messages[0].Body
		}
		return body != ""
	}); err != nil {
		return err
	}
	s.expect(s.ledger() == 1, "one ledger entry after the first delivery")
	s.say("the same OrderPlaced event is published twice more (a duplicate send, as at-least-once allows)")
	for range 2 {
		if _, err := s.sqs.SendMessage(s.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.q.URL), MessageBody: aws.String(body)}); err != nil {
			return err
		}
	}
	deleted := 0
	if err := s.pollBatches(2, func(b esm.Batch) bool { deleted += len(b.Deleted); return deleted == 2 }); err != nil {
		return err
	}
	s.expect(s.ledger() == 1, "still one ledger entry after the duplicates")
	return nil
}

// poison sends a message whose handler fails permanently and polls until the queue's
// redrive policy has moved it to the dead-letter queue, where it stays for the reader.
func (s *script) poison() error {
	s.say("a poison message: an OrderPlaced event whose handler fails permanently (the consumer's test hook)")
	id := orders.NewID("")
	s.poisonBody = fmt.Sprintf(`{"type":"OrderPlaced","event_id":"evt_%s","order_id":"ord_%s","customer_id":"c-13","amount_cents":4200,"fail":"poison"}`, id, id)
	if _, err := s.sqs.SendMessage(s.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.q.URL), MessageBody: aws.String(s.poisonBody)}); err != nil {
		return err
	}
	s.show("(a reported message reappears after the visibility timeout, %v; after %d receives the queue moves it to %s-dlq)",
		visibilityTimeout, maxReceiveCount, queueName)
	start := time.Now()
	if err := s.pollBatches(maxReceiveCount, func(esm.Batch) bool {
		n, err := s.queueHolds(s.q.DLQURL)
		return err == nil && n == 1
	}); err != nil {
		return err
	}
	s.show("-> the queue's redrive policy moved it to %s-dlq, %s after it was sent; ledger entries: %d", queueName, since(start), s.ledger())
	s.expect(s.ledger() == 1, "the poison message wrote nothing")
	return nil
}

// pollBatches polls until done reports true, printing each batch with the consumer's
// verdicts and the ledger's size. Each poll waits up to a second for messages, so the loop
// waits for events, not for time to pass; it gives up after want redeliveries' worth of
// polls past what the queue's visibility timeout needs, which only a queue that lost the
// messages reaches.
func (s *script) pollBatches(want int, done func(esm.Batch) bool) error {
	for range maxPolls(want) {
		b, err := s.poller.PollOnce(s.ctx)
		if err != nil {
			return err
		}
		if len(b.Messages) > 0 {
			s.show("-> %s; ledger entries: %d", describe(b, s.takeVerdicts()), s.ledger())
		}
		if done(b) {
			return nil
		}
	}
	return fmt.Errorf("the script did not go as expected: %d message(s) not consumed", want)
}

// ledger returns the ledger's size, -1 when it cannot be read.
func (s *script) ledger() int {
	n, err := s.count(s.ctx, ledgerTable)
	if err != nil {
		return -1
	}
	return n
}

// describe describes a batch on one line: its messages' receive counts, the consumer's
// verdicts, what was deleted and reported.
func describe(b esm.Batch, verdicts []idem.Verdict) string {
	counts := make([]string, len(b.Messages))
	for i, m := range b.Messages {
		counts[i] = strconv.Itoa(m.ReceiveCount)
	}
	vs := make([]string, len(verdicts))
	for i, v := range verdicts {
		vs[i] = v.String()
	}
	s := fmt.Sprintf("batch of %d (receive count %s): %s", len(b.Messages), strings.Join(counts, ", "), orNone(vs))
	if b.InvokeErr != nil {
		return s + fmt.Sprintf("; invocation failed (%v): deleted none", b.InvokeErr)
	}
	return s + fmt.Sprintf("; deleted %s, reported %s", countOrNone(len(b.Deleted)), countOrNone(len(b.Reported)))
}

func countOrNone(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// printBatch prints a batch of the live event source mapping.
func (st *stack) printBatch(b esm.Batch) {
	if len(b.Messages) == 0 && b.Err == nil {
		return
	}
	if b.Err != nil {
		fmt.Fprintf(st.out, "consumer: %v\n", b.Err)
		return
	}
	n, err := st.count(context.Background(), ledgerTable)
	if err != nil {
		n = -1
	}
	fmt.Fprintf(st.out, "consumer: %s; ledger entries: %d\n", describe(b, st.takeVerdicts()), n)
}

// queueHolds returns the messages the queue at url holds, visible or in flight.
func (s *script) queueHolds(url string) (int, error) {
	visible, inFlight, err := dlq.Depth(s.ctx, s.sqs, url)
	return visible + inFlight, err
}

// summary checks the end state and prints the summary line.
func (s *script) summary() error {
	main, err := s.queueHolds(s.q.URL)
	if err != nil {
		return err
	}
	dlq, err := s.queueHolds(s.q.DLQURL)
	if err != nil {
		return err
	}
	nOrders, err := s.count(s.ctx, ordersTable)
	if err != nil {
		return err
	}
	nLedger := s.ledger()
	s.expect(main == 0 && dlq == 1, "the queue empty, the poison message in the dead-letter queue")
	s.expect(nLedger == 1, "one ledger entry")
	fmt.Fprintf(s.out, "\nsummary: 3 requests -> %d order; 3 deliveries of its event -> %d ledger entry; "+
		"the poison message: %d receives, then %s-dlq (holding %d); ",
		nOrders, nLedger, maxReceiveCount, queueName, dlq)
	if len(s.bad) == 0 {
		fmt.Fprintln(s.out, "no duplicate side effects")
		return nil
	}
	fmt.Fprintln(s.out, "UNEXPECTED: see the steps above")
	return fmt.Errorf("the script did not go as expected: %s", strings.Join(s.bad, "; "))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no call"
	}
	return strings.Join(s, ", ")
}

// maxPolls is the most polls pollBatches makes for want deliveries: each delivery may take
// a visibility timeout of empty polls of up to pollWait each, plus the receive itself, and
// one more delivery's worth in hand.
func maxPolls(want int) int {
	return (want + 1) * (int(visibilityTimeout/pollWait) + 2)
}

// since formats the time since start for the script's lines.
func since(start time.Time) string { return time.Since(start).Round(100 * time.Millisecond).String() }
