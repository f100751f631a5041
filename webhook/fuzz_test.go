package webhook_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemgo/idem/webhook"
)

const fuzzSecret = "fuzz-secret"

// mac is the HMAC-SHA256 of prefix+body with fuzzSecret.
func mac(prefix string, body []byte) []byte {
	m := hmac.New(sha256.New, []byte(fuzzSecret))
	m.Write([]byte(prefix))
	m.Write(body)
	return m.Sum(nil)
}

// stripeValid is Stripe's rule, written apart from the package: one t
// within the tolerance of now, and a v1 that is the HMAC of "<t>.<body>".
func stripeValid(header string, body []byte) bool {
	var ts []string
	var v1 []string
	for _, item := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(item), "=")
		switch k {
		case "t":
			ts = append(ts, v)
		case "v1":
			v1 = append(v1, v)
		}
	}
	if len(ts) != 1 {
		return false
	}
	t, err := strconv.ParseInt(ts[0], 10, 64)
	if err != nil || now.Sub(time.Unix(t, 0)).Abs() > webhook.StripeTolerance {
		return false
	}
	want := mac(ts[0]+".", body)
	for _, s := range v1 {
		if got, err := hex.DecodeString(s); err == nil && bytes.Equal(got, want) {
			return true
		}
	}
	return false
}

// FuzzVerify checks that no header value or body makes a preset panic,
// that a refusal wraps ErrSignature, and that a preset accepts a delivery
// only when its sender's published algorithm, computed apart, says the
// signature is right.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"id":"evt_1","pending_webhooks":1}`)
	f.Add("sha256="+hex.EncodeToString(mac("", body)), body)
	f.Add(base64.StdEncoding.EncodeToString(mac("", body)), body)
	ts := strconv.FormatInt(now.Unix(), 10)
	f.Add("t="+ts+",v1="+hex.EncodeToString(mac(ts+".", body))+",v0=ab", body)
	f.Add("t=,v1=,t=1", []byte{})
	f.Add("sha256=ZZ", []byte("\xff\x00"))
	f.Fuzz(func(t *testing.T, header string, body []byte) {
		values := func(string) []string { return []string{header} }
		for _, tc := range []struct {
			s     webhook.Sender
			valid bool
		}{
			{webhook.GitHub(fuzzSecret), func() bool { // "sha256=", then the hex digest, in either case
				hexsum, ok := strings.CutPrefix(strings.TrimSpace(header), "sha256=")
				return ok && strings.EqualFold(hexsum, hex.EncodeToString(mac("", body)))
			}()},
			{webhook.Shopify(fuzzSecret), func() bool {
				got, err := base64.StdEncoding.DecodeString(strings.TrimSpace(header))
				return err == nil && bytes.Equal(got, mac("", body))
			}()},
			{webhook.Stripe(fuzzSecret), stripeValid(header, body)},
		} {
			err := tc.s.Verify(values, body, now)
			switch {
			case err == nil && !tc.valid:
				t.Fatalf("%s accepted %q over %q, which its algorithm refuses", tc.s.Name(), header, body)
			case err != nil && tc.valid:
				t.Fatalf("%s refused %q over %q, which its algorithm accepts: %v", tc.s.Name(), header, body, err)
			case err != nil && !errors.Is(err, webhook.ErrSignature):
				t.Fatalf("%s: %v does not wrap ErrSignature", tc.s.Name(), err)
			}
		}
	})
}
