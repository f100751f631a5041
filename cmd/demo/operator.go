package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/idemgo/idem/examples/orders"
	"github.com/idemgo/idem/internal/esm"
)

// poison sends a message whose handler fails permanently and polls until the queue's
// redrive policy has moved it to the dead-letter queue.
func (s *script) poison() error {
	s.say("a poison message: an OrderPlaced event whose handler fails permanently (the consumer's test hook)")
	id := orders.NewID("")
	body := fmt.Sprintf(`{"type":"OrderPlaced","event_id":"evt_%s","order_id":"ord_%s","customer_id":"c-13","amount_cents":4200,"fail":"poison"}`, id, id)
	if _, err := s.sqs.SendMessage(s.ctx, &sqs.SendMessageInput{QueueUrl: aws.String(s.q.URL), MessageBody: aws.String(body)}); err != nil {
		return err
	}
	s.show("(a reported message reappears after the visibility timeout, %v; after %d receives the queue moves it to %s-dlq)",
		visibilityTimeout, maxReceiveCount, queueName)
	start := time.Now()
	if err := s.pollBatches(1, func(esm.Batch) bool {
		n, err := s.queueHolds(s.q.DLQURL)
		return err == nil && n == 1
	}); err != nil {
		return err
	}
	s.show("-> the queue's redrive policy moved it to %s-dlq, %s after it was sent; ledger entries: %d", queueName, since(start), s.ledger())
	s.expect(s.ledger() == 1, "the poison message wrote nothing")
	return nil
}

// operator runs the operator's steps: the message from the dead-letter queue, its record,
// the fix, the release, the redrive.
func (s *script) operator() error {
	s.say("the operator takes the message from the dead-letter queue, leaving it there")
	msgs, err := esm.Peek(s.ctx, s.sqs, s.q.DLQURL)
	if err != nil {
		return err
	}
	data, err := esm.ReceiveAnswer(msgs)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.tmp, "dlq.json"), data, 0o600); err != nil {
		return err
	}
	s.show("$ aws sqs receive-message --queue-url %s \\", s.q.DLQURL)
	s.show("    --attribute-names All --message-attribute-names All --visibility-timeout 0 > dlq.json")
	s.expect(len(msgs) == 1, "one message in the dead-letter queue")

	s.say("...and looks up its record and its cause with the idem command")
	s.show("$ export IDEM_TABLE=%s AWS_ENDPOINT_URL_DYNAMODB=%s \\", idemTable, aws.ToString(s.db.Options().BaseEndpoint))
	s.show("    AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo")
	keyArgs := []string{"--sqs-event", "dlq.json", "--key-source", "body:event_id", "--action", orders.LedgerAction}
	out, err := s.idem(append([]string{"inspect"}, keyArgs...)...)
	if err != nil {
		return err
	}
	s.expect(strings.Contains(out, "state:        failed-permanent"), "inspect shows a permanent failure")
	fence := field(out, "fence:")

	s.say("the cause is fixed: a new orders-consumer is deployed (its test hooks off: \"poison\" no longer fails)")
	if err := s.deployConsumer(s.deps, false); err != nil {
		return err
	}
	s.say("release the key, fenced: only the record inspect showed is deleted")
	if out, err = s.idem(append(append([]string{"release"}, keyArgs...), "--fence", fence, "--yes")...); err != nil {
		return err
	}
	s.expect(strings.Contains(out, "released: "), "release deletes the record")

	s.say("redrive the dead-letter queue to %s (what aws sqs start-message-move-task does)", queueName)
	n, err := esm.Redrive(s.ctx, s.sqs, s.q.DLQURL, s.q.URL)
	if err != nil {
		return err
	}
	s.show("-> %d message(s) moved", n)
	s.expect(n == 1, "one message redriven")
	return s.pollBatches(1, func(b esm.Batch) bool { return len(b.Deleted) == 1 })
}

// idem runs the idem command with args in the demo's directory, against dynalite, prints
// the command line and its output, and returns the output. A non-zero exit is an error.
func (s *script) idem(args ...string) (string, error) {
	s.show("$ idem %s", strings.Join(args, " "))
	cmd := exec.CommandContext(s.ctx, s.idemBin, args...)
	cmd.Dir = s.tmp
	cmd.Env = idemEnv(os.Environ(), map[string]string{
		"IDEM_TABLE": idemTable, "AWS_ENDPOINT_URL_DYNAMODB": aws.ToString(s.db.Options().BaseEndpoint),
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "demo", "AWS_SECRET_ACCESS_KEY": "demo",
	})
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	for _, line := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
		s.show("%s", line)
	}
	if err != nil {
		return out.String(), fmt.Errorf("idem %s: %w", args[0], err)
	}
	return out.String(), nil
}

// idemEnv returns base without the AWS profile variables (a profile would override the
// demo's credentials, or fail when it does not exist) and with set's variables.
func idemEnv(base []string, set map[string]string) []string {
	var out []string
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if _, ok := set[name]; ok || name == "AWS_PROFILE" || name == "AWS_DEFAULT_PROFILE" {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range set {
		out = append(out, k+"="+v)
	}
	return out
}

// field returns the value of the first line of out that starts with name.
func field(out, name string) string {
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, name); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
