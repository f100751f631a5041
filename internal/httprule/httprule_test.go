package httprule_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem"
	"github.com/idemgo/idem/core"
	"github.com/idemgo/idem/internal/httprule"
)

func TestStoredEnvelope(t *testing.T) {
	t.Parallel()
	b, err := httprule.Encode("net/http", map[string]int{"statusCode": 201})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		stored  string
		shape   string
		resp    string
		omitted bool
		wantErr bool
	}{
		{"encoded", string(b), "net/http", `{"statusCode":201}`, false, false},
		{"omitted", string(httprule.EncodeOmitted("http-api")), "http-api", "", true, false},
		{"before the envelope", `{"statusCode":200,"body":"x"}`, "", `{"statusCode":200,"body":"x"}`, false, false},
		{"later version", `{"v":2,"shape":"http-api","response":{}}`, "", "", false, true},
		{"envelope without a response", `{"v":1,"shape":"http-api"}`, "", "", false, true},
		{"not JSON", `not json`, "", "", false, true},
		{"not an object", `[1]`, "", "", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st, err := httprule.Decode([]byte(tc.stored))
			if tc.wantErr {
				if !errors.Is(err, httprule.ErrStoredFormat) {
					t.Fatalf("err = %v, want ErrStoredFormat", err)
				}
				return
			}
			if err != nil || st.Shape != tc.shape || st.Omitted != tc.omitted || string(st.Response) != tc.resp {
				t.Fatalf("= %+v (%s), %v; want shape %q response %s omitted %v", st, st.Response, err, tc.shape, tc.resp, tc.omitted)
			}
		})
	}
}

// The HTTP status table of the wrappers' own answers.
func TestRefusal(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		verdict idem.Verdict
		err     error
		status  int
		typ     string
		retry   string
	}{
		{idem.InProgress, &core.InProgressError{RetryAt: now.Add(2100 * time.Millisecond)}, 409, httprule.InProgress, "3"},
		{idem.InProgress, &core.InProgressError{RetryAt: now.Add(-time.Second)}, 409, httprule.InProgress, "1"},
		{idem.KeyReused, core.ErrKeyReused, 422, httprule.KeyReused, ""},
		{idem.RetriesExhausted, core.ErrRetriesExhausted, 500, httprule.RetriesExhausted, ""},
		{idem.InvalidKey, core.ErrInvalidKey, 400, httprule.InvalidKey, ""},
		{idem.InvalidPayload, core.ErrInvalidPayload, 400, httprule.InvalidBody, ""},
		{idem.StoreFailed, core.MarkTransient(errors.New("throttled")), 503, httprule.StoreUnavailable, "1"},
		{idem.StoreFailed, errors.New("no such table"), 500, httprule.Internal, ""},
		{idem.OutcomeNotRecorded, idem.ErrOutcomeNotRecorded, 500, httprule.Internal, ""},
	}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("%d %s", i, tc.verdict), func(t *testing.T) {
			a := httprule.Refusal(tc.verdict, tc.err, now, nil)
			var p httprule.Problem
			if err := json.Unmarshal(a.Body, &p); err != nil {
				t.Fatal(err)
			}
			if a.Status != tc.status || p.Status != tc.status || p.Type != httprule.TypeBase+tc.typ || a.Header["Retry-After"] != tc.retry ||
				a.Header["Content-Type"] != httprule.ContentType || a.Verdict != tc.verdict || p.Title == "" {
				t.Errorf("= %d %+v %v; want %d %s Retry-After %q", a.Status, p, a.Header, tc.status, tc.typ, tc.retry)
			}
		})
	}
	if a := httprule.Omitted(); a.Status != 500 || a.Header[httprule.HeaderReplayed] != "true" {
		t.Errorf("Omitted() = %d %v", a.Status, a.Header)
	}
}

func TestRetryableStatus(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{200: false, 201: false, 400: false, 404: false, 408: true, 409: false, 422: false, 429: true, 499: false, 500: true, 503: true, 599: true} {
		if got := httprule.RetryableStatus(code); got != want {
			t.Errorf("RetryableStatus(%d) = %v want %v", code, got, want)
		}
	}
	if err := httprule.RetryLater(503); !core.RetryLater(err) || !errors.Is(err, httprule.ErrRetryableResponse) {
		t.Errorf("RetryLater(503) = %v: not marked to retry later", err)
	}
}

// Unstored: an answer to store (nil), one to record as a retryable failure
// (5xx, 408, 429), or one to leave no record (401, 403).
func TestUnstored(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code            int
		later, noRecord bool
	}{
		{200, false, false}, {201, false, false}, {400, false, false}, {404, false, false}, {409, false, false}, {422, false, false},
		{401, true, true}, {403, true, true},
		{408, true, false}, {429, true, false}, {500, true, false}, {503, true, false},
	} {
		err := httprule.Unstored(tc.code)
		if (err != nil) != tc.later || core.RetryLater(err) != tc.later || core.NoRecord(err) != tc.noRecord || httprule.Refused(tc.code) != tc.noRecord {
			t.Errorf("Unstored(%d) = %v: want retry later %v, no record %v", tc.code, err, tc.later, tc.noRecord)
		}
	}
}

// The problems about a key name the key's source: the Idempotency-Key
// header by default, else the configured parts, never a header the
// request did not carry.
func TestRefusalNamesTheKeySource(t *testing.T) {
	t.Parallel()
	delivery, err := httprule.HeaderPart("X-GitHub-Delivery")
	if err != nil {
		t.Fatal(err)
	}
	id, err := httprule.FieldPart("id")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_900_000_000, 0)
	for _, tc := range []struct {
		name  string
		parts []httprule.KeyPart
		want  string
	}{
		{"default", nil, "Idempotency-Key"},
		{"a header", []httprule.KeyPart{delivery}, "the X-GitHub-Delivery header"},
		{"a body field", []httprule.KeyPart{id}, "the body field id"},
	} {
		for _, v := range []idem.Verdict{idem.KeyReused, idem.InProgress, idem.RetriesExhausted} {
			var p httprule.Problem
			if err := json.Unmarshal(httprule.Refusal(v, nil, now, tc.parts).Body, &p); err != nil {
				t.Fatal(err)
			}
			text := p.Title + " " + p.Detail
			if !strings.Contains(text, tc.want) || (tc.parts != nil && strings.Contains(text, "Idempotency-Key")) {
				t.Errorf("%s, %s: %q; want it to name %q and no other source", tc.name, v, text, tc.want)
			}
		}
	}
}
