package idemhttp

import "testing"

func TestSetJSONField(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{}`, `{"idempotency_key":"K"}`},
		{` { } `, ` {"idempotency_key":"K" } `},
		{`{"amount":100}`, `{"idempotency_key":"K","amount":100}`},
		{`{"a":1.50,"idempotency_key":"old","b":{"idempotency_key":"nested"}}`, `{"a":1.50,"idempotency_key":"K","b":{"idempotency_key":"nested"}}`},
		{"{\n  \"idempotency_key\" :\n\t\"old\" ,\n  \"n\": 12345678901234567890\n}", "{\n  \"idempotency_key\" :\n\t\"K\" ,\n  \"n\": 12345678901234567890\n}"},
		{`{"idempotency_key":null}`, `{"idempotency_key":"K"}`},
		{`{"idempotency_key":123,"x":[1,2]}`, `{"idempotency_key":"K","x":[1,2]}`},
	} {
		got, err := setJSONField([]byte(tc.in), "idempotency_key", "K")
		if err != nil || string(got) != tc.want {
			t.Errorf("setJSONField(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`[]`, `"s"`, `{"a":}`, `{"a":1} x`, `{"a":1}{}`, `{`, `amount=1`} {
		if got, err := setJSONField([]byte(bad), "idempotency_key", "K"); err == nil {
			t.Errorf("setJSONField(%q) = %q, want an error", bad, got)
		}
	}
}
