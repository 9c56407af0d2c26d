//lint:file-ignore SA5008 odd json tags on purpose: how encoding/json reads them is under test

package canon_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/idemgate/idemgate/interceptor/internal/canon"
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

// Person is embedded by Contact, whose own Name shadows Person's.
type Person struct {
	Name  string
	Email string
}

type Contact struct {
	Person
	Name string
}

func TestShadowedEmbeddedFieldFollowsEncodingJSON(t *testing.T) {
	bob, alice := Contact{Name: "bob"}, Contact{Name: "alice"}
	if enc(t, bob) == enc(t, alice) {
		t.Fatalf("bob and alice encode alike: %s", enc(t, bob))
	}
	for _, c := range []Contact{bob, alice, {Person: Person{Name: "inner", Email: "e@x"}, Name: "outer"}} {
		want, err := json.Marshal([]any{c})
		if err != nil {
			t.Fatal(err)
		}
		if got := enc(t, c); !sameJSON(got, string(want)) {
			t.Errorf("Encode(%+v) = %s, encoding/json = %s", c, got, want)
		}
	}
	v, ok, err := canon.Field([]any{bob}, "Name")
	if err != nil || !ok || string(v) != `"bob"` {
		t.Fatalf(`Field(bob, "Name") = %s %v %v, want "bob"`, v, ok, err)
	}

	// The other rules of encoding/json's field selection.
	type Tagged struct {
		Name string `json:"Name"`
	}
	type Plain struct{ Name string }
	type Other struct{ Name string }
	type hidden struct{ Visible string }
	type Bits struct {
		Count int             `json:",string"`
		Ratio float64         `json:"ratio,string"`
		Flag  *bool           `json:"flag,string"`
		Label string          `json:"label,string"`
		Empty struct{ A int } `json:"empty,omitempty"`
		None  [0]int          `json:"none,omitempty"`
		Zero  [1]int          `json:"zero,omitempty"`
		When  time.Time       `json:"when,omitzero"`
		Bad   string          `json:"a\"b"`
	}
	yes := true
	cases := map[string]any{
		"tagged beats untagged at one depth": struct {
			Plain
			Tagged
		}{Plain{"plain"}, Tagged{"tagged"}},
		"ambiguous fields are dropped": struct {
			Plain
			Other
			Keep int
		}{Plain{"p"}, Other{"o"}, 1},
		"embedded pointer, nil and set": []any{struct{ *Plain }{}, struct{ *Plain }{&Plain{"x"}}},
		"unexported embedded struct":    struct{ hidden }{hidden{"v"}},
		"options":                       Bits{Count: 7, Ratio: 1e-7, Flag: &yes, Label: `a"<b>`, Bad: "b"},
	}
	for name, v := range cases {
		want, err := json.Marshal([]any{v})
		if err != nil {
			t.Fatal(err)
		}
		if got := enc(t, v); !sameJSON(got, string(want)) {
			t.Errorf("%s: Encode = %s\nencoding/json = %s", name, got, want)
		}
	}
}

// sameJSON says whether two JSON texts are the same value (object keys in any order).
func sameJSON(a, b string) bool {
	var x, y any
	return json.Unmarshal([]byte(a), &x) == nil && json.Unmarshal([]byte(b), &y) == nil && reflect.DeepEqual(x, y)
}

func TestSelfEmbeddingTypeEncodesLikeEncodingJSON(t *testing.T) {
	type Node struct {
		*Node
		Val int
	}
	done := make(chan string, 1)
	go func() {
		b, err := canon.Encode(nil, []any{Node{Val: 1}, Node{Node: &Node{Val: 2}, Val: 1}})
		done <- fmt.Sprint(string(b), " ", err)
	}()
	select {
	case got := <-done:
		if want := `[{"Val":1},{"Val":1}] <nil>`; got != want {
			t.Fatalf("Encode = %s, want %s (encoding/json's form)", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Encode of a self-embedding type did not return")
	}
}

func TestPointerCycleIsRefusedNamingArgumentAndPath(t *testing.T) {
	type List struct {
		Val  int
		Next *List
	}
	loop := &List{Val: 1}
	loop.Next = &List{Val: 2, Next: loop}
	m := map[string]any{"a": 1}
	m["self"] = m
	s := []any{1, nil}
	s[1] = s
	var x any
	x = &x
	cases := []struct {
		name string
		args []any
		arg  int
		path string
	}{
		{"pointer", []any{"tenant", loop}, 1, ".Next.Next"},
		{"map", []any{m}, 0, `["self"]`},
		{"slice", []any{1, 2, s}, 2, "[1]"},
		{"interface", []any{&x}, 0, ""},
	}
	for _, c := range cases {
		_, err := canon.Encode(nil, c.args)
		var ce *canon.Error
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "cycle") {
			t.Fatalf("%s: err = %v, want a *canon.Error about a cycle", c.name, err)
		}
		if ce.Arg != c.arg || ce.Path != c.path {
			t.Errorf("%s: error at argument %d path %q, want %d %q (%v)", c.name, ce.Arg, ce.Path, c.arg, c.path, err)
		}
		if _, jerr := json.Marshal(c.args); jerr == nil {
			t.Errorf("%s: encoding/json accepts it", c.name)
		}
	}
	// Shared (not cyclic) pointers are fine, as in encoding/json.
	shared := &List{Val: 3}
	if got := enc(t, []*List{shared, shared}); got != `[[{"Next":null,"Val":3},{"Next":null,"Val":3}]]` {
		t.Fatalf("shared pointer: %s", got)
	}
	// A deep but finite list is refused past MaxDepth with a bounded path.
	var deep *List
	for i := range canon.MaxDepth + 1 {
		deep = &List{Val: i, Next: deep}
	}
	_, err := canon.Encode(nil, []any{deep})
	var ce *canon.Error
	if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "nested deeper") || len(ce.Path) > 300 {
		t.Fatalf("deep list: %v", err)
	}
}

// Two map keys MarshalText writes alike: the form must not follow the map's iteration order.
func TestCollidingMapKeysEncodeDeterministically(t *testing.T) {
	m := map[*PTM]int{{S: "k"}: 1, {S: "k"}: 2, {S: "a"}: 3}
	first := enc(t, m)
	for range 50 {
		if got := enc(t, m); got != first {
			t.Fatalf("encodings differ: %s vs %s", got, first)
		}
	}
	if want := `[{"ptm:a":3,"ptm:k":1,"ptm:k":2}]`; first != want {
		t.Fatalf("Encode = %s, want %s", first, want)
	}
}

// TestFieldAmbiguousMapKeys: a map's keys are written by the caller; two keys that
// name one field in different cases are an error, never a map-order pick, and
// ExactField reads only the exact key.
func TestFieldAmbiguousMapKeys(t *testing.T) {
	var amb *canon.AmbiguousError
	args := []any{map[string]any{"tool": "delete_contact", "Tool": "get_contact"}}
	for _, f := range []func([]any, string) ([]byte, bool, error){canon.Field, canon.ExactField} {
		if v, ok, err := f(args, "tool"); !errors.As(err, &amb) || ok || !strings.Contains(err.Error(), `"Tool" and "tool"`) {
			t.Errorf("two keys for one field = %s %v %v, want an AmbiguousError naming both", v, ok, err)
		}
	}
	variant := []any{map[string]any{"Tool": "get_contact"}}
	if v, ok, err := canon.ExactField(variant, "tool"); !errors.As(err, &amb) || ok {
		t.Errorf("ExactField with only a case variant = %s %v %v, want an AmbiguousError", v, ok, err)
	}
	if v, ok, err := canon.Field(variant, "tool"); err != nil || !ok || string(v) != `"get_contact"` {
		t.Errorf("Field with one case variant = %s %v %v", v, ok, err)
	}
	if v, ok, err := canon.ExactField([]any{map[string]any{"tool": "x"}}, "tool"); err != nil || !ok || string(v) != `"x"` {
		t.Errorf("ExactField = %s %v %v", v, ok, err)
	}
}
