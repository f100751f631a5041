// Package dlq is what an operator does with an SQS dead-letter queue, for
// cmd/idem's dlq command, the demo and the tests: Peek receives a queue's
// messages and leaves them visible, ReceiveAnswer writes them as `aws sqs
// receive-message` prints them (the input of `idem inspect --sqs-event`),
// Depth counts a queue's messages, SourceQueue finds the queue whose redrive policy names a dead-letter
// queue, and Redrive moves a dead-letter queue's messages back to a source
// queue. For a redrive that decides message by message (cmd/idem's, which
// releases records first), a Pager pages through a queue of any size, each
// message once (hidden for its visibility timeout, told apart by id), and
// makes what it held visible again at the end; Move sends one message back
// and then deletes it; EventMessage gives a message as a Lambda SQS event
// carries it, for the key configurations.
//
// Redrive receives, sends and deletes, message by message, rather than
// calling StartMessageMoveTask: the move task is asynchronous, and moto
// 5.2.5 (the local SQS of the tests and the demo) does not implement it
// (it answers HTTP 500). Each redriven message is a new message: a new
// message id and a receive count that starts again, as with the move task.
//
// The functions take narrow interfaces of the SQS client's methods; a
// *sqs.Client implements each of them.
package dlq
