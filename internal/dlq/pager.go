package dlq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// maxIdleReceives is how many receives in a row may bring only messages a
// Pager returned before until it takes the queue for drained: each of them
// hides those messages again for the visibility timeout, so receives that
// bring nothing new mean the run outlived its visibility timeout or the
// queue holds only what was seen.
const maxIdleReceives = 3

// PagerAPI is the part of the SQS client a Pager calls.
type PagerAPI interface {
	// ReceiveMessage receives the next messages, hiding them.
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	// ChangeMessageVisibilityBatch makes messages visible again.
	ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// A Pager pages through every message of a queue of any size, each once:
// ReceiveMessage returns at most ten messages a call, and a message it
// returns is hidden for the Pager's visibility timeout, so later receives
// bring the others. SQS may still return a message again (a receive is at
// least once, and a message whose visibility timeout ends during the run
// comes back): Page tells those apart by message id. Not safe for
// concurrent use.
type Pager struct {
	client     PagerAPI
	url        string
	visibility int32
	seen       map[string]bool   // the ids of every message returned
	held       map[string]string // message id → latest receipt handle, until Forget
	idle       int
}

// NewPager returns a Pager over the queue at url that hides each message it
// receives for visibility (whole seconds, 1 s to 12 h).
func NewPager(client PagerAPI, url string, visibility time.Duration) (*Pager, error) {
	s := int64(visibility / time.Second)
	if s < 1 || s > 12*60*60 || visibility%time.Second != 0 {
		return nil, fmt.Errorf("dlq: visibility timeout %v: want whole seconds from 1s to 12h", visibility)
	}
	return &Pager{client: client, url: url, visibility: int32(s), seen: map[string]bool{}, held: map[string]string{}}, nil
}

// A Page is what one receive brought: New, the messages not returned before;
// Again, those returned before (with a new receipt handle), also when the
// caller deleted them since: a copy that SQS delivered again.
type Page struct {
	New, Again []types.Message
}

// Next receives the next page, with a one-second long poll, every system
// attribute and every message attribute. Done is true once the queue is
// drained: a receive came back empty, or maxIdleReceives receives in a row
// brought nothing new.
func (p *Pager) Next(ctx context.Context) (page Page, done bool, err error) {
	out, err := p.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl: aws.String(p.url), MaxNumberOfMessages: MaxPeek, VisibilityTimeout: p.visibility, WaitTimeSeconds: waitSeconds,
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{"All"},
	})
	if err != nil {
		return Page{}, false, fmt.Errorf("dlq: receive from %s: %w", p.url, err)
	}
	if len(out.Messages) == 0 {
		return Page{}, true, nil
	}
	for _, m := range out.Messages {
		id := aws.ToString(m.MessageId)
		if p.seen[id] {
			page.Again = append(page.Again, m)
		} else {
			page.New = append(page.New, m)
		}
		p.seen[id] = true
		p.held[id] = aws.ToString(m.ReceiptHandle)
	}
	if len(page.New) > 0 {
		p.idle = 0
	} else {
		p.idle++
	}
	return page, p.idle >= maxIdleReceives, nil
}

// Forget drops a message the caller deleted from the Pager's held
// messages, so that Restore leaves it alone. A later receive of it is
// still Again.
func (p *Pager) Forget(m types.Message) { delete(p.held, aws.ToString(m.MessageId)) }

// Restore makes every message the Pager received and the caller did not
// Forget visible again at once, with ChangeMessageVisibilityBatch (ten a
// call), so that nothing a run left behind stays hidden after it. It
// returns how many it made visible; a message deleted meanwhile by someone
// else is skipped.
func (p *Pager) Restore(ctx context.Context) (int, error) {
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, 0, MaxPeek)
	restored := 0
	flush := func() error {
		if len(entries) == 0 {
			return nil
		}
		out, err := p.client.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(p.url), Entries: entries})
		if err != nil {
			return fmt.Errorf("dlq: make messages of %s visible again: %w", p.url, err)
		}
		restored += len(out.Successful)
		entries = entries[:0]
		return nil
	}
	for id, handle := range p.held {
		entries = append(entries, types.ChangeMessageVisibilityBatchRequestEntry{
			Id: aws.String(strconv.Itoa(len(entries))), ReceiptHandle: aws.String(handle), VisibilityTimeout: 0,
		})
		delete(p.held, id)
		if len(entries) == MaxPeek {
			if err := flush(); err != nil {
				return restored, err
			}
		}
	}
	return restored, flush()
}
