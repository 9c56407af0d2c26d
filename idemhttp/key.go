package idemhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// hashDomain separates this hash from every other use of SHA-256 on the same key. It is
// part of the vendor keys already sent: changing it changes every hashed key.
const hashDomain = "idemgate/idemhttp/v1\x00"

// shaper turns an activity key into a vendor key under one profile's rules. Built once per
// transport so the per-request path is a table lookup per byte.
type shaper struct {
	min, max int
	allowed  [256]bool
	uuidOnly bool
	quoted   bool
	verbatim bool
}

func newShaper(p Profile) shaper {
	s := shaper{min: p.MinLen, max: p.MaxLen, uuidOnly: p.UUIDOnly, quoted: p.Quoted, verbatim: p.Verbatim}
	if p.Charset == "" {
		for c := 0x21; c <= 0x7e; c++ {
			s.allowed[c] = true
		}
	} else {
		for i := 0; i < len(p.Charset); i++ {
			s.allowed[p.Charset[i]] = true
		}
	}
	return s
}

// VendorKey returns the key p forwards for the activity key: the same activity key
// always gives the same vendor key, and distinct activity keys give distinct vendor keys.
//
// A key that already fits the profile's rules is sent as it is (a minted activity key
// is a UUID, which fits most vendors). Any other key is hashed (SHA-256) into a UUIDv8,
// or its 32 hex digits when the vendor allows no '-' or fewer than 36 characters. A key
// that has the shape of such a hash is hashed too, so a key sent as it is can never
// equal the hash of another key. With Verbatim, a key that does not fit is refused
// with ErrBadKey instead.
func (p Profile) VendorKey(activityKey string) (string, error) {
	if err := p.Validate(); err != nil {
		return "", err
	}
	if p.Where == Nowhere {
		return "", nil
	}
	sh := newShaper(p)
	k, err := sh.shape(activityKey)
	if err != nil {
		return "", fmt.Errorf("idemgate/idemhttp: %s: %w", p.Name, err)
	}
	return k, nil
}

// shape returns the vendor key, or an error saying why the key cannot be shaped (the
// caller adds the vendor and activity).
func (s *shaper) shape(key string) (string, error) {
	var v string
	switch {
	case s.verbatim:
		if !s.fits(key) {
			return "", fmt.Errorf("%w: the key does not fit the vendor's rules (%s) and the profile is Verbatim",
				ErrBadKey, s.rules())
		}
		v = key
	case s.fits(key) && !looksHashed(key):
		v = key
	default:
		h, ok := s.hashed(key)
		if !ok { // Validate rules this out; kept for profiles built by hand in tests.
			return "", fmt.Errorf("%w: no hashed form fits the vendor's rules (%s)", ErrBadKey, s.rules())
		}
		v = h
	}
	if s.quoted {
		return quote(v), nil
	}
	return v, nil
}

func (s *shaper) fits(key string) bool {
	if s.uuidOnly {
		return isLowerUUID(key) && key != "00000000-0000-0000-0000-000000000000"
	}
	if len(key) == 0 || len(key) < s.min || (s.max > 0 && len(key) > s.max) {
		return false
	}
	for i := 0; i < len(key); i++ {
		if !s.allowed[key[i]] {
			return false
		}
	}
	return true
}

func (s *shaper) rules() string {
	var b strings.Builder
	if s.uuidOnly {
		b.WriteString("a canonical lower-case non-zero UUID")
	} else {
		fmt.Fprintf(&b, "length %d–", max(s.min, 1))
		if s.max > 0 {
			fmt.Fprintf(&b, "%d", s.max)
		} else {
			b.WriteString("any")
		}
		b.WriteString(", charset ")
		b.WriteString(s.charsetString())
	}
	return b.String()
}

func (s *shaper) charsetString() string {
	var b []byte
	for c := 0; c < 256; c++ {
		if s.allowed[c] {
			b = append(b, byte(c))
		}
	}
	return fmt.Sprintf("%q", b)
}

// hashed returns the hashed vendor form of key, a UUIDv8 (36 chars) or its 32 hex digits,
// whichever the rules allow; ok is false when neither does.
func (s *shaper) hashed(key string) (string, bool) {
	sum := sha256.Sum256([]byte(hashDomain + key))
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x80 // version 8: custom
	u[8] = u[8]&0x3f | 0x80 // RFC 9562 variant

	hexOK := s.allowsAll("0123456789abcdef")
	if s.uuidOnly || (hexOK && s.allowed['-'] && (s.max == 0 || s.max >= 36) && s.min <= 36) {
		var buf [36]byte
		hex.Encode(buf[0:8], u[0:4])
		buf[8] = '-'
		hex.Encode(buf[9:13], u[4:6])
		buf[13] = '-'
		hex.Encode(buf[14:18], u[6:8])
		buf[18] = '-'
		hex.Encode(buf[19:23], u[8:10])
		buf[23] = '-'
		hex.Encode(buf[24:], u[10:])
		return string(buf[:]), true
	}
	if hexOK && (s.max == 0 || s.max >= 32) && s.min <= 32 {
		return hex.EncodeToString(u), true
	}
	return "", false
}

func (s *shaper) allowsAll(chars string) bool {
	for i := 0; i < len(chars); i++ {
		if !s.allowed[chars[i]] {
			return false
		}
	}
	return true
}

// looksHashed reports whether key has the shape of a hashed vendor key (a lower-case
// UUIDv8, with or without hyphens). Such keys are hashed rather than sent as they are,
// which keeps the sent-as-is keys and the hashed keys apart.
func looksHashed(key string) bool {
	switch len(key) {
	case 36:
		return isLowerUUID(key) && key[14] == '8' && strings.IndexByte("89ab", key[19]) >= 0
	case 32:
		for i := 0; i < 32; i++ {
			if !isLowerHex(key[i]) {
				return false
			}
		}
		return key[12] == '8' && strings.IndexByte("89ab", key[16]) >= 0
	}
	return false
}

func isLowerUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		switch i {
		case 8, 13, 18, 23:
			if s[i] != '-' {
				return false
			}
		default:
			if !isLowerHex(s[i]) {
				return false
			}
		}
	}
	return true
}

func isLowerHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' }

// quote writes v as a structured-field string (RFC 8941 §3.3.3).
func quote(v string) string {
	if !strings.ContainsAny(v, `"\`) {
		return `"` + v + `"`
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(v); i++ {
		if v[i] == '"' || v[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(v[i])
	}
	b.WriteByte('"')
	return b.String()
}
