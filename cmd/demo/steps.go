package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/idemgo/idem/examples/orders"
	idemlambda "github.com/idemgo/idem/lambda"
)

// fixPath is the demo's route that deploys the fixed consumer.
const fixPath = "/demo/fix-consumer"

// The titles of the blocks of steps printed for the reader; a block's steps follow its
// title, indented by stepIndent, and end at a blank line. Every line of a block is shell:
// a step's description is a comment.
const (
	operatorTitle = "Your turn: the poison message waits in orders-demo-dlq. In another terminal, in any\n" +
		"directory, run these commands in order (bash or zsh; curl is the only tool besides idem).\n" +
		"This window prints every batch the consumer gets."
	orderTitle = "Then place an order of your own; run the curl command a second time (same $KEY) to get\n" +
		"the stored answer replayed (Idempotent-Replayed: true)."
	stepIndent = "  "
	endOfSteps = "Ctrl-C stops the demo and every server it started."
)

// step is one step to take by hand: what it does and the shell commands that do it.
type step struct {
	what     string
	commands []string
}

// block is a titled list of steps.
type block struct {
	title string
	steps []step
}

// printSteps prints the blocks, numbering the steps of each from 1.
func printSteps(w io.Writer, blocks []block) {
	for _, b := range blocks {
		fmt.Fprintf(w, "\n%s\n\n", b.title)
		for i, s := range b.steps {
			fmt.Fprintf(w, "%s# %d. %s\n", stepIndent, i+1, s.what)
			for _, c := range s.commands {
				fmt.Fprintf(w, "%s%s\n", stepIndent, strings.ReplaceAll(c, "\n", "\n"+stepIndent))
			}
		}
	}
	fmt.Fprintln(w)
}

// handSteps returns the steps to take by hand: the operator's way back from the dead-letter
// queue (docs/operations.md), then an order of one's own.
func (st *stack) handSteps(ctx context.Context, base string) ([]block, error) {
	fence, err := st.poisonFence(ctx)
	if err != nil {
		return nil, err
	}
	dynamo, sqsURL := aws.ToString(st.db.Options().BaseEndpoint), aws.ToString(st.sqs.Options().BaseEndpoint)
	keys := "--key-source body:event_id --action " + orders.LedgerAction // the consumer's key configuration
	key := "--sqs-event dlq.json " + keys
	operator := block{title: operatorTitle, steps: []step{
		{"Use the idem command the demo built (from a clone: go install ./cmd/idem, see the README).",
			[]string{pathExport(st.binDir)}},
		{"Point idem at the demo's servers: the AWS SDK's own variables; no AWS account is used.",
			[]string{"export AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo",
				fmt.Sprintf("export AWS_ENDPOINT_URL_DYNAMODB=%s AWS_ENDPOINT_URL_SQS=%s", dynamo, sqsURL),
				"export IDEM_TABLE=" + idemTable}},
		{"Copy the dead-letter queue's message into dlq.json, leaving it in the queue.",
			[]string{"idem dlq peek --queue-url " + st.q.DLQURL + " > dlq.json"}},
		{"Find its record and its cause (state failed-permanent; error: the poison hook).",
			[]string{"idem inspect " + key}},
		{"Fix the cause: deploy an orders-consumer whose test hook is off.",
			[]string{"curl -fsS -X POST " + base + fixPath}},
		{"Release the key; --fence (inspect's fence line) deletes only the record it showed.",
			[]string{"idem release " + key + " --fence " + fence + " --yes"}},
		{"Redrive the dead-letter queue to " + queueName + " (it releases, fenced, a record that would not run again; --dry-run says what it would do): the demo's window shows the consumer run it once.",
			[]string{"idem dlq redrive --queue-url " + st.q.DLQURL + " " + keys}},
	}}
	order := block{title: orderTitle, steps: []step{
		{"A key of your own, then the order.", []string{
			"KEY=order-$(date +%s)",
			"curl -i -X POST " + base + "/orders \\\n" +
				"  -H 'Content-Type: application/json' -H \"Idempotency-Key: $KEY\" \\\n" +
				"  -d '{\"customer_id\":\"c-7\",\"items\":[{\"sku\":\"mug\",\"qty\":1,\"price_cents\":900}]}'",
		}},
	}}
	return []block{operator, order}, nil
}

// poisonFence returns the fence of the poison message's record, as `idem inspect` prints it.
func (st *stack) poisonFence(ctx context.Context) (string, error) {
	key, err := idemlambda.SQSKey(idemlambda.KeyFromBodyField("event_id"), orders.LedgerAction, events.SQSMessage{Body: st.poisonBody})
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, st.idemBin, "inspect", "--key", key, "--json")
	cmd.Env = idemEnv(os.Environ(), map[string]string{
		"IDEM_TABLE": idemTable, "AWS_ENDPOINT_URL_DYNAMODB": aws.ToString(st.db.Options().BaseEndpoint),
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "demo", "AWS_SECRET_ACCESS_KEY": "demo",
	})
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("idem inspect of the poison message's record: %w", err)
	}
	var v struct {
		Fence string `json:"fence"`
	}
	if err := json.Unmarshal(out, &v); err != nil || v.Fence == "" {
		return "", fmt.Errorf("idem inspect of the poison message's record printed no fence: %s", out)
	}
	return v.Fence, nil
}

// fixConsumer deploys the consumer without its test hooks, as step 5 asks.
func (st *stack) fixConsumer(w http.ResponseWriter, _ *http.Request) {
	if err := st.deployConsumer(st.deps, false); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	fmt.Fprintln(st.out, "deployed orders-consumer without its test hooks: \"poison\" no longer fails")
	fmt.Fprintln(w, "orders-consumer deployed without its test hooks")
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

// pathExport is the command that puts dir first on PATH.
func pathExport(dir string) string {
	if q := shellQuote(dir); q == dir {
		return `export PATH="` + dir + `:$PATH"`
	}
	return "export PATH=" + shellQuote(dir) + `:"$PATH"`
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+:,@%=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
