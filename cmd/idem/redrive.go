package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/ddbstore"
	"github.com/idemgo/idem/internal/dlq"
	idemlambda "github.com/idemgo/idem/lambda"
)

const redriveSynopsis = "[--to URL] (--table T --key-config FILE | --table T --key-source SRC... --action NAME [--envelope E]... | --no-release) " +
	"[--dry-run] [--rate N] [--max N] [--max-attempts N] [--visibility-timeout D] [--json]"

// Defaults of dlq redrive.
const (
	// defaultRedriveRate is how many messages a second redrive moves
	// unless --rate says otherwise.
	defaultRedriveRate = 100
	// defaultRedriveVisibility hides each message redrive receives from
	// other receives while the run handles it (--visibility-timeout).
	defaultRedriveVisibility = 5 * time.Minute
)

// What redrive does with a message (redriveMessage.Action).
const (
	actionRelease = "release" // release its record (fenced), then move it
	actionMove    = "move"    // move it, its record left as it is
	actionLeave   = "leave"   // leave it in the dead-letter queue
)

// Why redrive leaves a message in the dead-letter queue.
const (
	whyNoKey   = "no usable key under the key configuration: the function would report it again (check the configuration, or fix the message)"
	whyChanged = "its record changed since it was read: not released, not moved; run the redrive again"
	whyBlind   = "moved without reading its record (--no-release)"
	whyInvalid = "a payload the function refuses (invalid_payload): fix the message"
	whyReused  = "its key holds another payload's record: the function answers it key_reused (check the fingerprint selection, or the message)"
)

// redriveMessage is what redrive did, or would do, with one message.
type redriveMessage struct {
	MessageID string `json:"message_id"`
	KeyHash   string `json:"key_hash,omitempty"`
	Key       string `json:"key,omitempty"`   // where it is derived (recordView.Key)
	State     string `json:"state,omitempty"` // the record's, as read; "none" without one
	Attempts  int    `json:"attempts,omitempty"`
	Action    string `json:"action"` // release, move or leave
	Why       string `json:"why"`
	Error     string `json:"error,omitempty"` // a key error
	// Done is false in a dry run, and for a message left behind.
	Done bool `json:"done"`
}

// redriveView is what redrive reports.
type redriveView struct {
	From     string `json:"from"`
	To       string `json:"to"`
	DryRun   bool   `json:"dry_run"`
	Received int    `json:"received"`
	Moved    int    `json:"moved"`
	Released int    `json:"released"`
	Left     int    `json:"left"`
	// Stopped is "max" (stoppedMax) when --max ended the run: more
	// messages may wait.
	Stopped  string           `json:"stopped,omitempty"`
	Messages []redriveMessage `json:"messages"`
}

// redriveRun is dlq redrive's command line.
type redriveRun struct {
	o                 *common
	keys              configFlags
	queueURL, to      string
	noRelease, dryRun bool
	rate              float64
	max, maxAttempts  int
	visibility        time.Duration
}

func (c *cli) redriveFlags() *redriveRun {
	o := c.flags("dlq redrive", "--queue-url URL "+redriveSynopsis)
	r := &redriveRun{o: o}
	fs := o.fs
	fs.StringVar(&r.queueURL, "queue-url", "", "the dead-letter queue's `URL`")
	fs.StringVar(&r.to, "to", "", "the queue `URL` to move the messages to (default: the one queue whose redrive policy names --queue-url)")
	r.keys.register(fs)
	fs.BoolVar(&r.noRelease, "no-release", false, "move every message without reading or releasing any record: each comes back with what its record says (a stored failure replays it into the dead-letter queue)")
	fs.BoolVar(&r.dryRun, "dry-run", false, "say what the redrive would do, message by message, and change nothing (every message received is made visible again)")
	fs.Float64Var(&r.rate, "rate", defaultRedriveRate, "move at most this many `messages` a second (0: no limit)")
	fs.IntVar(&r.max, "max", 0, "handle at most this many `messages` (0: every message)")
	fs.IntVar(&r.maxAttempts, "max-attempts", 0, "the runner's WithMaxAttempts: a retryable failure with this many attempts has exhausted its retries (0 or unset: the SQS wrapper's default, no bound: the queue limits deliveries)")
	fs.DurationVar(&r.visibility, "visibility-timeout", defaultRedriveVisibility, "how long each message received stays hidden from other receives while the run handles it (whole seconds)")
	return r
}

// parse parses args and checks them: the queue, and unless --no-release,
// the table and the key configuration.
func (r *redriveRun) parse(args []string) (idemlambda.KeyConfig, error) {
	var kc idemlambda.KeyConfig
	if err := r.o.parseArgs(args); err != nil {
		return kc, err
	}
	switch {
	case r.queueURL == "":
		return kc, usageErrorf("no queue: pass --queue-url with the dead-letter queue's URL")
	case r.rate < 0 || r.max < 0 || r.maxAttempts < 0:
		return kc, usageErrorf("--rate, --max and --max-attempts want 0 or more")
	case r.noRelease && r.keys.set():
		return kc, usageErrorf("--no-release reads no record: it takes no key configuration")
	case r.noRelease:
		return kc, nil
	case r.o.table == "" || !r.keys.set():
		return kc, usageErrorf("redrive releases the record of each message that would not run again on its own: pass --table (or set IDEM_TABLE) " +
			"and the function's key configuration (--key-config, or --key-source and --action), or --no-release to move the messages only")
	}
	if r.maxAttempts == 0 {
		r.maxAttempts = core.NoAttemptLimit
	}
	kc, err := r.keys.load()
	if err != nil {
		return kc, err
	}
	if _, err := kc.Source(); err != nil || kc.Action == "" {
		return kc, usageErrorf("the key configuration must be an SQS wrapper's, with a key source and an action: %v", err)
	}
	return kc, prefixFrom(kc, &r.o.layout)
}

func (c *cli) dlqRedrive(ctx context.Context, args []string) error {
	r := c.redriveFlags()
	kc, err := r.parse(args)
	if err != nil {
		return err
	}
	d := &redriver{c: c, r: r, kc: kc, pace: c.newPacer(r.rate), moved: map[string]bool{}}
	if d.pager, err = r.open(ctx, c, d); err != nil {
		return err
	}
	d.prog = newProgress(c.stderr, c.now, !r.o.json)
	d.view = redriveView{From: r.queueURL, To: r.to, DryRun: r.dryRun, Messages: []redriveMessage{}}
	runErr := d.run(ctx)
	d.prog.clear()
	// Whatever happened, nothing the run received and did not move stays
	// hidden: a message left behind is visible again at once.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if _, err := d.pager.Restore(rctx); err != nil && runErr == nil {
		runErr = err
	}
	if err := d.write(c.stdout); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil && (d.view.Left > 0 || d.view.Stopped != "") {
		runErr = &leftBehindError{d.leftMessage()}
	}
	return runErr
}

// open makes the clients of the run: SQS's, and unless --no-release the
// store (with --endpoint-url for both); it finds the queue to move to, and
// returns the pager over the dead-letter queue.
func (r *redriveRun) open(ctx context.Context, c *cli, d *redriver) (*dlq.Pager, error) {
	client, err := c.sqsClient(ctx, r.o.profile, r.o.region, r.o.endpoint)
	if err != nil {
		return nil, err
	}
	d.client = client
	if r.to == "" {
		if r.to, err = dlq.SourceQueue(ctx, client, r.queueURL); errors.Is(err, dlq.ErrNoSingleSource) {
			return nil, usageErrorf("%v: pass --to with the queue to move the messages to", err)
		} else if err != nil {
			return nil, err
		}
	}
	if !r.noRelease {
		if d.store, err = c.open(ctx, r.o); err != nil {
			return nil, err
		}
	}
	pager, err := dlq.NewPager(client, r.queueURL, r.visibility)
	if err != nil {
		return nil, usageErrorf("--visibility-timeout: %v", err)
	}
	return pager, nil
}

// redriver is one run of dlq redrive.
type redriver struct {
	c      *cli
	r      *redriveRun
	kc     idemlambda.KeyConfig
	client *sqs.Client
	store  *ddbstore.Store // nil with --no-release
	pager  *dlq.Pager
	pace   *pacer
	prog   *progress
	view   redriveView
	moved  map[string]bool // the ids of the messages moved
}

// run pages through the dead-letter queue until it is drained or --max
// messages were handled. An AWS error ends it.
func (d *redriver) run(ctx context.Context) error {
	for {
		page, done, err := d.pager.Next(ctx)
		if err != nil {
			return err
		}
		for _, m := range page.Again {
			if err := d.again(ctx, m); err != nil {
				return err
			}
		}
		for _, m := range page.New {
			if d.r.max > 0 && d.view.Received >= d.r.max {
				d.view.Stopped = stoppedMax
				return nil
			}
			if err := d.one(ctx, m); err != nil {
				return err
			}
		}
		d.prog.show(d.progressLine)
		if done {
			return nil
		}
	}
}

// again handles a message received before: a copy of one moved is deleted
// (SQS delivered it again); one left behind stays, for Restore.
func (d *redriver) again(ctx context.Context, m types.Message) error {
	if d.r.dryRun || !d.moved[aws.ToString(m.MessageId)] {
		return nil
	}
	if _, err := d.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(d.r.queueURL), ReceiptHandle: m.ReceiptHandle}); err != nil {
		return fmt.Errorf("dlq: delete a second copy of message %s from %s: %w", aws.ToString(m.MessageId), d.r.queueURL, err)
	}
	d.pager.Forget(m)
	return nil
}

// one handles a message received for the first time: it reads its record
// and decides (plan), then, unless this is a dry run, releases the record
// if it would not run again, moves the message, and deletes it from the
// dead-letter queue.
func (d *redriver) one(ctx context.Context, m types.Message) error {
	d.view.Received++
	res, rec, err := d.plan(ctx, m)
	if err != nil {
		return err
	}
	if res.Action == actionLeave || d.r.dryRun {
		d.add(res)
		return nil
	}
	if err := d.pace.wait(ctx); err != nil {
		return err
	}
	if res.Action == actionRelease {
		err := d.store.Release(ctx, *rec)
		if errors.Is(err, idem.ErrRecordChanged) || errors.Is(err, idem.ErrNotFound) {
			res.Action, res.Why = actionLeave, whyChanged
			d.add(res)
			return nil
		}
		if err != nil {
			return err
		}
		d.view.Released++
	}
	if err := dlq.Move(ctx, d.client, m, d.r.queueURL, d.r.to); err != nil {
		return err
	}
	d.pager.Forget(m)
	d.moved[res.MessageID] = true
	d.view.Moved++
	res.Done = true
	d.add(res)
	return nil
}

// plan computes the key and the fingerprint of m as the function does,
// reads its record (consistently) and says what to do: release it and move
// m, move m only, or leave m (no key, a payload refused, or a record of
// another payload under its key).
func (d *redriver) plan(ctx context.Context, m types.Message) (redriveMessage, *core.Record, error) {
	res := redriveMessage{MessageID: aws.ToString(m.MessageId), Action: actionMove}
	if d.store == nil {
		res.Why = whyBlind
		return res, nil, nil
	}
	msg := dlq.EventMessage(m)
	key, err := d.kc.MessageKey(ctx, msg)
	if err != nil {
		res.Action, res.Why, res.Error = actionLeave, whyNoKey, err.Error()
		return res, nil, nil
	}
	fp, err := d.kc.MessageFingerprint(msg)
	if err != nil {
		res.Action, res.Why, res.Error = actionLeave, whyInvalid, err.Error()
		return res, nil, nil
	}
	res.KeyHash = idem.HashKey(key)
	if core.IsDerivedKey(key) {
		res.Key = key
	}
	now := d.c.now()
	rec, err := d.store.Get(ctx, key, now)
	var found *core.Record
	switch {
	case errors.Is(err, idem.ErrNotFound):
		res.State = "none"
	case err != nil:
		return res, nil, err
	case rec.Fingerprint != fp:
		res.State, res.Attempts = stateOf(rec, now), rec.Attempts
		res.Action, res.Why = actionLeave, whyReused
		return res, nil, nil
	default:
		found = &rec
		res.State, res.Attempts = stateOf(rec, now), rec.Attempts
	}
	disp := dispose(found, now, d.r.maxAttempts)
	res.Why = disp.why
	if disp.release {
		res.Action = actionRelease
	}
	return res, found, nil
}

// add records a message's result.
func (d *redriver) add(res redriveMessage) {
	if res.Action == actionLeave {
		d.view.Left++
	}
	d.view.Messages = append(d.view.Messages, res)
}

func (d *redriver) progressLine(elapsed time.Duration) string {
	what := "redrive"
	if d.r.dryRun {
		what = "redrive (dry run)"
	}
	return fmt.Sprintf("%s: %d received, %d moved, %d released, %d left, %s",
		what, d.view.Received, d.view.Moved, d.view.Released, d.view.Left, elapsed.Round(time.Second))
}

// leftMessage is the error of a run that left messages behind.
func (d *redriver) leftMessage() string {
	v := d.view
	msg := fmt.Sprintf("%s left in %s (see above: each says why)", count(v.Left, "message"), v.From)
	if v.DryRun {
		msg = fmt.Sprintf("the redrive would leave %s in %s (see above: each says why)", count(v.Left, "message"), v.From)
	}
	if v.Stopped != "" {
		msg += fmt.Sprintf("; stopped at --max %d: more messages may wait", d.r.max)
	}
	return msg
}

// write writes the report: one row per kind of message (action, state,
// why) with its count, a line per message left behind, and what was done;
// or the view as JSON.
func (d *redriver) write(w io.Writer) error {
	v := d.view
	if d.r.o.json {
		return writeJSON(w, v)
	}
	if v.DryRun {
		fmt.Fprintf(w, "dry run: nothing changed; the %s received are visible again in %s\n\n", count(v.Received, "message"), v.From)
	}
	if rows := summaryRows(v.Messages); len(rows) > 1 {
		if err := table(w, rows); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	for _, m := range v.Messages {
		if m.Action == actionLeave {
			fmt.Fprintf(w, "left %s (key hash %s): %s%s\n", m.MessageID, orDash(m.KeyHash), m.Why, suffix(": ", m.Error))
		}
	}
	verb, released, left := "moved", "released", "left"
	if v.DryRun {
		verb, released, left = "would move", "would release", "would leave"
	}
	_, err := fmt.Fprintf(w, "%s %s from %s to %s (%s %s first); %s %d in %s\n",
		verb, count(v.Moved+movable(v), "message"), v.From, v.To, released, count(v.Released+releasable(v), "record"), left, v.Left, v.From)
	return err
}

// movable and releasable count, in a dry run, the messages that would be
// moved and the records that would be released (in a real run, Moved and
// Released count what was).
func movable(v redriveView) int {
	if !v.DryRun {
		return 0
	}
	return v.Received - v.Left
}

func releasable(v redriveView) int {
	n := 0
	for _, m := range v.Messages {
		if v.DryRun && m.Action == actionRelease {
			n++
		}
	}
	return n
}

// summaryRows counts the messages by action, record state and why.
func summaryRows(msgs []redriveMessage) [][]string {
	type group struct{ action, state, why string }
	counts := map[group]int{}
	for _, m := range msgs {
		counts[group{m.Action, orDash(m.State), m.Why}]++
	}
	groups := make([]group, 0, len(counts))
	for g := range counts {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		return a.action+"\x00"+a.state+"\x00"+a.why < b.action+"\x00"+b.state+"\x00"+b.why
	})
	rows := [][]string{{"MESSAGES", "ACTION", "STATE", "WHY"}}
	for _, g := range groups {
		rows = append(rows, []string{strconv.Itoa(counts[g]), g.action, g.state, g.why})
	}
	return rows
}

// suffix is sep and s, or nothing for an empty s.
func suffix(sep, s string) string {
	if s == "" {
		return ""
	}
	return sep + s
}
