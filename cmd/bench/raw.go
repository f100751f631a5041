package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// rawSender sends DynamoDB requests without the SDK's client: the same JSON
// body the SDK sends, built by hand from the SDK's input type, signed with
// the SDK's SigV4 signer (aws/signer/v4) and sent with net/http. It is the
// floor a DynamoDB call costs this process: the bench compares idem's calls
// with the same calls sent this way.
type rawSender struct {
	endpoint string // http://127.0.0.1:PORT/
	region   string
	creds    aws.Credentials
	signer   *v4.Signer
	http     *http.Client
}

func newRawSender(endpoint string) *rawSender {
	return &rawSender{
		endpoint: endpoint + "/",
		region:   "us-east-1",
		creds:    aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"},
		signer:   v4.NewSigner(),
		// The same pool as the SDK client's (newClient).
		http: &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second}},
	}
}

// rawError is a DynamoDB error answer: its HTTP status and __type.
type rawError struct {
	Status int
	Type   string
}

func (e *rawError) Error() string { return fmt.Sprintf("HTTP %d: %s", e.Status, e.Type) }

// send signs body as operation op (PutItem, UpdateItem, ...), sends it and
// reads the whole answer; a status other than 200 is a *rawError.
func (s *rawSender) send(ctx context.Context, op string, body []byte) error {
	sum := sha256.Sum256(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810."+op)
	if err := s.signer.SignHTTP(ctx, s.creds, req, hex.EncodeToString(sum[:]), "dynamodb", s.region, time.Now()); err != nil {
		return err
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Type string `json:"__type"`
		}
		_ = json.Unmarshal(out, &e)
		return &rawError{Status: resp.StatusCode, Type: e.Type}
	}
	return nil
}

// rawBody returns the operation name and JSON body of a captured request:
// the members ddbstore sets, encoded as the SDK encodes them.
func rawBody(in any) (string, []byte, error) {
	b := make([]byte, 0, 1024)
	switch in := in.(type) {
	case *dynamodb.PutItemInput:
		b = append(b, `{"TableName":`...)
		b = appendJSONString(b, aws.ToString(in.TableName))
		b = append(b, `,"Item":`...)
		b = appendItem(b, in.Item)
		b = appendCommon(b, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
		b = appendEnum(b, "ReturnValues", string(in.ReturnValues))
		b = appendEnum(b, "ReturnValuesOnConditionCheckFailure", string(in.ReturnValuesOnConditionCheckFailure))
		return "PutItem", append(b, '}'), nil
	case *dynamodb.UpdateItemInput:
		b = append(b, `{"TableName":`...)
		b = appendJSONString(b, aws.ToString(in.TableName))
		b = append(b, `,"Key":`...)
		b = appendItem(b, in.Key)
		if in.UpdateExpression != nil {
			b = append(b, `,"UpdateExpression":`...)
			b = appendJSONString(b, *in.UpdateExpression)
		}
		b = appendCommon(b, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
		b = appendEnum(b, "ReturnValues", string(in.ReturnValues))
		b = appendEnum(b, "ReturnValuesOnConditionCheckFailure", string(in.ReturnValuesOnConditionCheckFailure))
		return "UpdateItem", append(b, '}'), nil
	}
	return "", nil, fmt.Errorf("bench: the raw sender does not send %T", in)
}

func appendCommon(b []byte, cond *string, names map[string]string, values map[string]types.AttributeValue) []byte {
	if cond != nil {
		b = append(b, `,"ConditionExpression":`...)
		b = appendJSONString(b, *cond)
	}
	if len(names) > 0 {
		b = append(b, `,"ExpressionAttributeNames":{`...)
		first := true
		for k, v := range names {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, k)
			b = append(b, ':')
			b = appendJSONString(b, v)
		}
		b = append(b, '}')
	}
	if len(values) > 0 {
		b = append(b, `,"ExpressionAttributeValues":`...)
		b = appendItem(b, values)
	}
	return b
}

func appendEnum(b []byte, name, v string) []byte {
	if v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, v)
}

func appendItem(b []byte, m map[string]types.AttributeValue) []byte {
	b = append(b, '{')
	first := true
	for k, v := range m {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendValue(b, v)
	}
	return append(b, '}')
}

// appendValue encodes one attribute value as DynamoDB's JSON protocol does.
func appendValue(b []byte, av types.AttributeValue) []byte {
	switch v := av.(type) {
	case *types.AttributeValueMemberS:
		b = append(b, `{"S":`...)
		b = appendJSONString(b, v.Value)
	case *types.AttributeValueMemberN:
		b = append(b, `{"N":`...)
		b = appendJSONString(b, v.Value)
	case *types.AttributeValueMemberB:
		b = append(b, `{"B":"`...)
		b = base64.StdEncoding.AppendEncode(b, v.Value)
		b = append(b, '"')
	case *types.AttributeValueMemberBOOL:
		b = append(b, `{"BOOL":`...)
		b = strconv.AppendBool(b, v.Value)
	case *types.AttributeValueMemberNULL:
		b = append(b, `{"NULL":true`...)
	case *types.AttributeValueMemberM:
		b = append(b, `{"M":`...)
		b = appendItem(b, v.Value)
	case *types.AttributeValueMemberL:
		b = append(b, `{"L":[`...)
		for i, e := range v.Value {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendValue(b, e)
		}
		b = append(b, ']')
	case *types.AttributeValueMemberSS:
		b = appendStrings(b, "SS", v.Value)
	case *types.AttributeValueMemberNS:
		b = appendStrings(b, "NS", v.Value)
	case *types.AttributeValueMemberBS:
		b = append(b, `{"BS":[`...)
		for i, e := range v.Value {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '"')
			b = base64.StdEncoding.AppendEncode(b, e)
			b = append(b, '"')
		}
		b = append(b, ']')
	default:
		b = append(b, `{"NULL":true`...)
	}
	return append(b, '}')
}

func appendStrings(b []byte, typ string, ss []string) []byte {
	b = append(b, '{', '"')
	b = append(b, typ...)
	b = append(b, `":[`...)
	for i, s := range ss {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, s)
	}
	return append(b, ']')
}

// appendJSONString appends s as a JSON string (invalid UTF-8 as U+FFFD).
func appendJSONString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
