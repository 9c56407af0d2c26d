package canon_test

import (
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/idemgate/idemgate/internal/canon"
)

type Inner struct {
	Price float64 `json:"price"`
}

type Order struct {
	Zeta   string            `json:"zeta"`
	Alpha  int               `json:"alpha"`
	Skip   string            `json:"-"`
	Opt    string            `json:"opt,omitempty"`
	Items  []Inner           `json:"items"`
	Labels map[string]string `json:"labels"`
	When   time.Time         `json:"when"`
	hidden int
}

func enc(t *testing.T, args ...any) string {
	t.Helper()
	b, err := canon.Encode(nil, args)
	if err != nil {
		t.Fatalf("Encode(%v): %v", args, err)
	}
	if !json.Valid(b) {
		t.Fatalf("Encode(%v) = %s: not valid JSON", args, b)
	}
	return string(b)
}

func TestEncodeIsCanonical(t *testing.T) {
	utc := time.Date(2026, 11, 29, 12, 0, 0, 5, time.UTC)
	paris := utc.In(time.FixedZone("CET", 3600))
	a := Order{Zeta: "z", Alpha: 1, Skip: "x", Items: []Inner{{1.5}}, Labels: map[string]string{"b": "2", "a": "1"}, When: utc, hidden: 7}
	b := Order{Zeta: "z", Alpha: 1, Skip: "other", Items: []Inner{{1.5}}, Labels: map[string]string{"a": "1", "b": "2"}, When: paris}
	want := `[{"alpha":1,"items":[{"price":1.5}],"labels":{"a":"1","b":"2"},"when":"2026-11-29T12:00:00.000000005Z","zeta":"z"}]`
	if got := enc(t, a); got != want {
		t.Fatalf("Encode = %s\nwant     %s", got, want)
	}
	if enc(t, a) != enc(t, b) {
		t.Fatalf("same data, other zone / map order / ignored field: %s vs %s", enc(t, a), enc(t, b))
	}
	// A struct and the map a JSON decoder would make of it encode alike.
	m := map[string]any{"zeta": "z", "alpha": json.Number("1"), "items": []any{map[string]any{"price": 1.5}},
		"labels": map[string]any{"a": "1", "b": "2"}, "when": "2026-11-29T12:00:00.000000005Z"}
	if enc(t, m) != want {
		t.Fatalf("map form = %s, want %s", enc(t, m), want)
	}
	cases := map[string]struct {
		v    any
		want string
	}{
		"escapes":   {"a\"b\\c\n<>&\x01\u2028", `["a\"b\\c\n\u003c\u003e\u0026\u0001\u2028"]`},
		"bytes":     {[]byte("hi"), `["aGk="]`},
		"nil ptr":   {(*Order)(nil), `[null]`},
		"nil slice": {[]int(nil), `[null]`},
		"big float": {1e21, `[1e+21]`},
		"int keys":  {map[int]bool{10: true, 2: false}, `[{"10":true,"2":false}]`},
		"raw json":  {json.RawMessage(`{"b":1, "a":[2]}`), `[{"a":[2],"b":1}]`},
		"neg zero":  {math.Copysign(0, -1), `[-0]`},
	}
	for name, c := range cases {
		if got := enc(t, c.v); got != c.want {
			t.Errorf("%s: Encode = %s, want %s", name, got, c.want)
		}
	}
	if canon.Hash([]byte(want)) == canon.Hash([]byte(want+" ")) {
		t.Fatal("hash ignores a byte")
	}
}

func TestEncodeRefusesWhatHasNoCanonicalForm(t *testing.T) {
	type withChan struct {
		Name string
		C    chan int
	}
	cases := []struct {
		name string
		args []any
		arg  int
		path string
	}{
		{"chan", []any{"ok", withChan{C: make(chan int)}}, 1, ".C"},
		{"func", []any{func() {}}, 0, ""},
		{"NaN", []any{1, []float64{1, math.NaN()}}, 1, "[1]"},
		{"Inf", []any{map[string]any{"x": math.Inf(1)}}, 0, `["x"]`},
		{"complex", []any{complex(1, 2)}, 0, ""},
	}
	for _, c := range cases {
		_, err := canon.Encode(nil, c.args)
		var ce *canon.Error
		if !errors.As(err, &ce) {
			t.Fatalf("%s: err = %v, want *canon.Error", c.name, err)
		}
		if ce.Arg != c.arg || ce.Path != c.path {
			t.Errorf("%s: error at argument %d path %q, want %d %q (%v)", c.name, ce.Arg, ce.Path, c.arg, c.path, err)
		}
	}
}

func TestField(t *testing.T) {
	type Contact struct {
		Email string `json:"email"`
		Name  string
	}
	args := []any{"tenant", Contact{Email: "a@example.com", Name: "Ann"}}
	for _, name := range []string{"email", "Email", "EMAIL"} {
		v, ok, err := canon.Field(args, name)
		if err != nil || !ok || string(v) != `"a@example.com"` {
			t.Fatalf("Field(%s) = %s %v %v", name, v, ok, err)
		}
	}
	if v, ok, _ := canon.Field([]any{map[string]any{"Email": "b@x"}}, "email"); !ok || string(v) != `"b@x"` {
		t.Fatalf("Field in a map = %s %v", v, ok)
	}
	if _, ok, _ := canon.Field(args, "phone"); ok {
		t.Fatal("Field found a field that is not there")
	}
}

func BenchmarkEncodeHashFiveFields(b *testing.B) {
	type Charge struct {
		Customer string  `json:"customer"`
		Amount   int64   `json:"amount"`
		Currency string  `json:"currency"`
		Note     string  `json:"note"`
		Rate     float64 `json:"rate"`
	}
	args := []any{Charge{"cus_123", 4200, "eur", "order 4217", 0.25}}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := canon.EncodeHash(args); err != nil {
			b.Fatal(err)
		}
	}
}
