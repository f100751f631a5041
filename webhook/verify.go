package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Verify checks that body, a delivery's raw body (decoded from base64 if
// the platform encoded it), was signed by the sender with one of its
// secrets, as the signature in its header says; header returns the values
// of a request header, looked up case-insensitively. now is the wrapper's
// clock, against which a Stripe-Signature's timestamp must be within the
// tolerance. Every secret is compared with every signature, each in
// constant time (hmac.Equal). The error, for a delivery refused, wraps
// ErrSignature and says why, never what the signature should have been.
func (s Sender) Verify(header func(name string) []string, body []byte, now time.Time) error {
	if err := s.Err(); err != nil {
		return err
	}
	vals := header(s.header)
	switch {
	case len(vals) == 0:
		return fmt.Errorf("%w: no %s header", ErrSignature, s.header)
	case len(vals) > 1:
		return fmt.Errorf("%w: %d %s headers, want one", ErrSignature, len(vals), s.header)
	}
	if s.scheme == stripeHMAC {
		return s.verifyStripe(vals[0], body, now)
	}
	sig, err := s.decode(vals[0])
	if err != nil {
		return err
	}
	if !s.matches(nil, body, [][]byte{sig}) {
		return fmt.Errorf("%w: the %s header matches none of the %s secrets (%d)", ErrSignature, s.header, s.name, len(s.secrets))
	}
	return nil
}

// decode returns the signature's bytes from its header's value.
func (s Sender) decode(v string) ([]byte, error) {
	enc, ok := strings.CutPrefix(strings.TrimSpace(v), s.prefix)
	if !ok {
		return nil, fmt.Errorf("%w: the %s header does not start with %q", ErrSignature, s.header, s.prefix)
	}
	var sig []byte
	var err error
	if s.encoding == Base64 {
		sig, err = base64.StdEncoding.DecodeString(enc)
	} else {
		sig, err = hex.DecodeString(enc)
	}
	if err != nil || len(sig) != sha256.Size {
		return nil, fmt.Errorf("%w: the %s header is not a %d-byte signature", ErrSignature, s.header, sha256.Size)
	}
	return sig, nil
}

// matches reports whether the HMAC-SHA256 of prefix+body with one of the
// secrets equals one of sigs. Every pair is compared, none skipped, so
// that the time taken does not depend on which matched.
func (s Sender) matches(prefix, body []byte, sigs [][]byte) bool {
	ok := false
	for _, secret := range s.secrets {
		mac := hmac.New(sha256.New, secret)
		mac.Write(prefix)
		mac.Write(body)
		sum := mac.Sum(nil)
		for _, sig := range sigs {
			if hmac.Equal(sum, sig) {
				ok = true
			}
		}
	}
	return ok
}

// verifyStripe checks a Stripe-Signature value: one timestamp t, one or
// more v1 signatures of "<t>.<body>" (other schemes ignored, so that no
// weaker one can stand in for v1), and t within the tolerance of now.
func (s Sender) verifyStripe(v string, body []byte, now time.Time) error {
	var ts []string
	var sigs [][]byte
	for _, item := range strings.Split(v, ",") {
		k, val, _ := strings.Cut(strings.TrimSpace(item), "=")
		switch k {
		case "t":
			ts = append(ts, val)
		case "v1":
			if sig, err := hex.DecodeString(val); err == nil && len(sig) == sha256.Size {
				sigs = append(sigs, sig)
			}
		}
	}
	if len(ts) != 1 {
		return fmt.Errorf("%w: the %s header has %d timestamps (t=), want one", ErrSignature, s.header, len(ts))
	}
	t, err := strconv.ParseInt(ts[0], 10, 64)
	if err != nil {
		return fmt.Errorf("%w: the %s header's timestamp %q is not a number of seconds", ErrSignature, s.header, ts[0])
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: the %s header has no v1 signature", ErrSignature, s.header)
	}
	if !s.matches([]byte(ts[0]+"."), body, sigs) {
		return fmt.Errorf("%w: no v1 signature of the %s header matches the %s secrets (%d)", ErrSignature, s.header, s.name, len(s.secrets))
	}
	signed := time.Unix(t, 0)
	if age := now.Sub(signed); age > s.tolerance || -age > s.tolerance {
		return fmt.Errorf("%w: the %s header was signed at %s, %v from now, outside the tolerance of %v (a replayed delivery, or a clock off)",
			ErrSignature, s.header, signed.UTC().Format(time.RFC3339), age.Round(time.Second), s.tolerance)
	}
	return nil
}
