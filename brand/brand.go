package brand

import (
	"fmt"
	"strings"
)

// Brand is the type tag of a branded id's text form: 1 to 8 characters, an
// upper-case letter followed by upper-case letters or digits.
type Brand string

// The brands echostore mints. Others are made with New.
const (
	// EVT brands stream records.
	EVT Brand = "EVT"
	// JOB brands jobs of a job queue.
	JOB Brand = "JOB"
)

// MaxBrandLen is the longest brand.
const MaxBrandLen = 8

// textLen is the number of base32 characters after "<BRAND>_".
const textLen = 13

const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// decode maps a byte to its Crockford value, or 0xFF. Only the canonical
// upper-case digits are accepted, so that the text form is one-to-one.
var decode = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xFF
	}
	for i := 0; i < len(crockford); i++ {
		t[crockford[i]] = byte(i)
	}
	return t
}()

// New returns b as a Brand after checking its form.
func New(b string) (Brand, error) {
	if err := Brand(b).Validate(); err != nil {
		return "", err
	}
	return Brand(b), nil
}

// Validate reports whether b is a well-formed brand.
func (b Brand) Validate() error {
	if len(b) == 0 || len(b) > MaxBrandLen {
		return fmt.Errorf("brand %q: want 1 to %d characters: %w", clip(string(b)), MaxBrandLen, ErrMalformed)
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("brand %q: want an upper-case letter then upper-case letters or digits: %w", clip(string(b)), ErrMalformed)
		}
	}
	return nil
}

// Format returns the text form of id under brand b: "<b>_<13 base32>".
func (b Brand) Format(id ID) string {
	buf := make([]byte, 0, len(b)+1+textLen)
	return string(b.AppendFormat(buf, id))
}

// AppendFormat appends the text form of id under brand b to dst.
func (b Brand) AppendFormat(dst []byte, id ID) []byte {
	dst = append(dst, b...)
	dst = append(dst, '_')
	var t [textLen]byte
	v := uint64(id)
	for i := textLen - 1; i >= 0; i-- {
		t[i] = crockford[v&31]
		v >>= 5
	}
	return append(dst, t[:]...)
}

// Parse parses s as an id of brand b and returns its ID. It fails with
// ErrBrand for a well-formed id of another brand and ErrMalformed otherwise.
func (b Brand) Parse(s string) (ID, error) {
	got, err := Parse(s)
	if err != nil {
		return 0, err
	}
	if got.Brand != b {
		return 0, fmt.Errorf("id %q has brand %s, want %s: %w", clip(s), got.Brand, b, ErrBrand)
	}
	return got.ID, nil
}

// ParseAny parses s as either the text form of brand b or a Redis stream id,
// the two forms the CLI's --from and --to accept.
func (b Brand) ParseAny(s string) (ID, error) {
	if strings.IndexByte(s, '_') >= 0 {
		return b.Parse(s)
	}
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		return ParseRedisID(s)
	}
	return 0, fmt.Errorf("id %q: want %s_<13 base32> or <ms>-<seq>: %w", clip(s), b, ErrMalformed)
}

// Branded is an ID together with its brand. Its zero value is not valid
// text; MarshalText of it fails.
type Branded struct {
	Brand Brand
	ID    ID
}

// String returns the text form "<BRAND>_<13 base32>".
func (x Branded) String() string { return x.Brand.Format(x.ID) }

// MarshalText implements encoding.TextMarshaler.
func (x Branded) MarshalText() ([]byte, error) {
	if err := x.Brand.Validate(); err != nil {
		return nil, err
	}
	return x.Brand.AppendFormat(nil, x.ID), nil
}

// UnmarshalText implements encoding.TextUnmarshaler. If x.Brand is set
// beforehand, a text of another brand is rejected with ErrBrand.
func (x *Branded) UnmarshalText(text []byte) error {
	got, err := Parse(string(text))
	if err != nil {
		return err
	}
	if x.Brand != "" && got.Brand != x.Brand {
		return fmt.Errorf("id %q has brand %s, want %s: %w", clip(string(text)), got.Brand, x.Brand, ErrBrand)
	}
	*x = got
	return nil
}

// Parse parses the text form of a branded id of any well-formed brand. It
// accepts only the canonical form that String produces: upper-case Crockford
// digits, exactly 13 of them, the first at most 'F'.
func Parse(s string) (Branded, error) {
	us := strings.LastIndexByte(s, '_')
	if us < 0 {
		return Branded{}, fmt.Errorf("id %q: want <BRAND>_<13 base32>: %w", clip(s), ErrMalformed)
	}
	b := Brand(s[:us])
	if err := b.Validate(); err != nil {
		return Branded{}, fmt.Errorf("id %q: %w", clip(s), err)
	}
	digits := s[us+1:]
	if len(digits) != textLen {
		return Branded{}, fmt.Errorf("id %q: want %d base32 characters after the brand, got %d: %w",
			clip(s), textLen, len(digits), ErrMalformed)
	}
	var v uint64
	for i := 0; i < textLen; i++ {
		d := decode[digits[i]]
		if d == 0xFF {
			return Branded{}, fmt.Errorf("id %q: %q is not an upper-case Crockford base32 digit: %w",
				clip(s), digits[i], ErrMalformed)
		}
		v = v<<5 | uint64(d)
	}
	if decode[digits[0]] > 0xF {
		return Branded{}, fmt.Errorf("id %q: first digit above F overflows 64 bits: %w", clip(s), ErrMalformed)
	}
	return Branded{Brand: b, ID: ID(v)}, nil
}
