package idemtest

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// StreamARN is the Kinesis stream of the builders' records; TableStreamARN
// the DynamoDB table stream of theirs.
const (
	// StreamARN is the Kinesis data stream the Kinesis records come from.
	StreamARN = "arn:aws:kinesis:" + Region + ":" + Account + ":stream/order-events"
	// TableStreamARN is the DynamoDB stream the DynamoDB records come from.
	TableStreamARN = "arn:aws:dynamodb:" + Region + ":" + Account + ":table/orders/stream/2030-01-01T00:00:00.000"
)

// Shard is the shard of the builders' stream records.
const Shard = "shardId-000000000000"

// SequenceNumber returns the n-th sequence number of a shard: digits as
// Kinesis and DynamoDB Streams write them, increasing with n, so that
// records built with increasing n are in the shard's order.
func SequenceNumber(n int) string {
	return fmt.Sprintf("4959033827149025660855969253836157%022d", n)
}

// KinesisRecord returns a record of the Kinesis stream StreamARN as
// Lambda's event source delivers it: sequence number seq (see
// SequenceNumber), partition key and data (the bytes put; the wrapper's
// decoder reads them, as aws-lambda-go decodes the base64 Kinesis sends).
func KinesisRecord(seq, partitionKey string, data []byte) events.KinesisEventRecord {
	return events.KinesisEventRecord{
		AwsRegion:         Region,
		EventID:           Shard + ":" + seq,
		EventName:         "aws:kinesis:record",
		EventSource:       "aws:kinesis",
		EventSourceArn:    StreamARN,
		EventVersion:      "1.0",
		InvokeIdentityArn: "arn:aws:iam::" + Account + ":role/handler",
		Kinesis: events.KinesisRecord{
			ApproximateArrivalTimestamp: events.SecondsEpochTime{Time: SentAt},
			Data:                        data,
			PartitionKey:                partitionKey,
			SequenceNumber:              seq,
			KinesisSchemaVersion:        "1.0",
		},
	}
}

// KinesisEvent returns the event of one invocation of Lambda's Kinesis
// event source: recs, in order.
func KinesisEvent(recs ...events.KinesisEventRecord) events.KinesisEvent {
	return events.KinesisEvent{Records: recs}
}

// DynamoDBInsert returns the INSERT of an item as the table's stream
// (TableStreamARN, view NEW_AND_OLD_IMAGES) delivers it to Lambda:
// sequence number seq, the item's keys and its new image.
func DynamoDBInsert(seq string, keys, newImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return dynamoDBRecord("INSERT", seq, keys, nil, newImage)
}

// DynamoDBModify returns the MODIFY of an item, with its old and new
// images (see DynamoDBInsert).
func DynamoDBModify(seq string, keys, oldImage, newImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return dynamoDBRecord("MODIFY", seq, keys, oldImage, newImage)
}

// DynamoDBRemove returns the REMOVE of an item, with its old image (see
// DynamoDBInsert).
func DynamoDBRemove(seq string, keys, oldImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return dynamoDBRecord("REMOVE", seq, keys, oldImage, nil)
}

func dynamoDBRecord(name, seq string, keys, oldImage, newImage map[string]events.DynamoDBAttributeValue) events.DynamoDBEventRecord {
	return events.DynamoDBEventRecord{
		AWSRegion:      Region,
		EventID:        eventID(seq),
		EventName:      name,
		EventSource:    "aws:dynamodb",
		EventVersion:   "1.1",
		EventSourceArn: TableStreamARN,
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: SentAt},
			Keys:                        keys,
			NewImage:                    newImage,
			OldImage:                    oldImage,
			SequenceNumber:              seq,
			SizeBytes:                   int64(64 + 32*(len(keys)+len(oldImage)+len(newImage))),
			StreamViewType:              "NEW_AND_OLD_IMAGES",
		},
	}
}

// eventID is a stream record's event id, 32 hex digits derived from its
// sequence number (the same record built twice has the same id).
func eventID(seq string) string {
	sum := sha256.Sum256([]byte(seq))
	return hex.EncodeToString(sum[:16])
}

// DynamoDBEvent returns the event of one invocation of Lambda's DynamoDB
// Streams event source: recs, in order.
func DynamoDBEvent(recs ...events.DynamoDBEventRecord) events.DynamoDBEvent {
	return events.DynamoDBEvent{Records: recs}
}
