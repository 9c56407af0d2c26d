package secrets

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask is what a redacted secret is replaced with.
const Mask = "xxxxx"

// Redact returns s with every secret it can recognise replaced by Mask, for
// messages and logs. It is the module's one redaction: store specs (PostgreSQL
// URLs and libpq key=value DSNs), MCP server URLs, and text that embeds URLs (an
// error from net/url or net/http quotes the URL it failed on). It hides
//
//   - the password of a URL's user info (postgres://app:PW@db/x, http://u:PW@host/);
//   - the values of URL query parameters whose names say secret (password,
//     sslpassword, token, access_token, api_key, apikey, secret, client_secret,
//     signature, credential, auth, …): ?password=PW, ?access_token=T;
//   - the values of key=value pairs with such names, quoted or not, anywhere in
//     the text (password='p w', api_key=K).
//
// Everything else is returned as it is: the user name, host and database stay.
func Redact(s string) string {
	if urlForm.MatchString(s) && !strings.ContainsAny(strings.TrimSpace(s), " \t\n") {
		return redactURL(s)
	}
	if _, ok := KeyValues(s); ok {
		return redactPairs(s) // a libpq DSN: its quoted values may hold anything
	}
	// Text: URLs in it one by one, key=value pairs in the rest.
	var b strings.Builder
	last := 0
	for _, m := range urlInText.FindAllStringIndex(s, -1) {
		b.WriteString(redactPairs(s[last:m[0]]))
		b.WriteString(redactURL(s[m[0]:m[1]]))
		last = m[1]
	}
	b.WriteString(redactPairs(s[last:]))
	return b.String()
}

// Scrub is Redact for text that may echo the secrets of specs in another form
// (decoded, escaped, quoted apart from their URL): it also replaces every secret
// Values finds in specs.
func Scrub(text string, specs ...string) string {
	text = Redact(text)
	for _, spec := range specs {
		for _, v := range Values(spec) {
			text = strings.ReplaceAll(text, v, Mask)
		}
	}
	return text
}

// ScrubError returns err with its text scrubbed (Scrub) of the secrets of specs;
// it unwraps to err, so errors.Is and errors.As still see the cause. nil stays nil.
func ScrubError(err error, specs ...string) error {
	if err == nil {
		return nil
	}
	return scrubbed{err: err, msg: Scrub(err.Error(), specs...)}
}

type scrubbed struct {
	err error
	msg string
}

func (e scrubbed) Error() string { return e.msg }
func (e scrubbed) Unwrap() error { return e.err }

// Secret reports whether a parameter or key named name holds a secret.
func Secret(name string) bool {
	n := strings.ToLower(name)
	n = strings.NewReplacer("-", "", "_", "", ".", "").Replace(n)
	if n == "key" || n == "code" { // Google's ?key=API_KEY; an OAuth authorization code
		return true
	}
	for _, w := range secretWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// secretWords, lower case without separators: a name containing one names a secret.
var secretWords = []string{"password", "passwd", "pwd", "token", "secret", "apikey", "accesskey", "privatekey",
	"clientkey", "signature", "credential", "auth", "sessionid", "sig", "jwt", "bearer", "cookie"}

// urlForm matches a string in URL form: a scheme, then "://".
var urlForm = regexp.MustCompile(`^\s*[A-Za-z][A-Za-z0-9+.-]*://`)

// urlInText matches a URL inside text, up to a space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// kvPair matches a key=value pair; the value is quoted ('...' with backslash
// escapes, possibly unterminated) or runs to the next space, as in libpq's form.
var kvPair = regexp.MustCompile(`([A-Za-z_][\w.-]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)*\\?)`)

func redactPairs(s string) string {
	if !strings.Contains(s, "=") {
		return s
	}
	return kvPair.ReplaceAllStringFunc(s, func(m string) string {
		sub := kvPair.FindStringSubmatch(m)
		if !Secret(sub[1]) {
			// A URL under another key (NAME=URL, url=… in a log line) keeps its
			// credentials hidden as anywhere else.
			return sub[1] + sub[2] + urlInText.ReplaceAllStringFunc(sub[3], redactURL)
		}
		return sub[1] + sub[2] + Mask
	})
}

func redactURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Opaque != "" {
		// Not a URL Go can parse: hide everything that may be a password, from the
		// first ':' after the scheme to the last '@'.
		scheme, rest, _ := strings.Cut(s, "://")
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if c := strings.Index(rest[:at], ":"); c >= 0 {
				rest = rest[:c+1] + Mask + rest[at:]
			}
		}
		return scheme + "://" + redactQuery(rest)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
	}
	u.RawQuery = redactQuery(u.RawQuery)
	u.Fragment, u.RawFragment = redactFragment(u.Fragment), ""
	return u.String()
}

// redactFragment hides secret parameters in a fragment (#access_token=… of an
// OAuth implicit grant).
func redactFragment(f string) string {
	if !strings.Contains(f, "=") {
		return f
	}
	return redactQuery(f)
}

// redactQuery replaces the values of secret parameters in a query ("a=1&token=T")
// or in the part after the first '?' of s.
func redactQuery(s string) string {
	head, q, found := strings.Cut(s, "?")
	if !found {
		q, head = head, ""
	}
	parts := strings.Split(q, "&")
	for i, p := range parts {
		k, _, ok := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if ok && Secret(k) {
			parts[i] = p[:strings.Index(p, "=")+1] + Mask
		}
	}
	if !found {
		return strings.Join(parts, "&")
	}
	return head + "?" + strings.Join(parts, "&")
}

// Values returns the secrets in spec (a URL, a key=value DSN, or text holding
// them) as written and decoded, so text that echoes one in another form can be
// scrubbed.
func Values(spec string) []string {
	var out []string
	add := func(s ...string) {
		for _, v := range s {
			if v != "" && v != Mask {
				out = append(out, v)
			}
		}
	}
	for _, m := range urlInText.FindAllString(spec, -1) {
		u, err := url.Parse(m)
		if err != nil {
			continue
		}
		if p, ok := u.User.Password(); ok {
			add(p, url.QueryEscape(p), url.PathEscape(p))
		}
		for k, vs := range u.Query() {
			if Secret(k) {
				for _, v := range vs {
					add(v, url.QueryEscape(v))
				}
			}
		}
	}
	if urlForm.MatchString(spec) {
		return out
	}
	if pairs, ok := KeyValues(spec); ok {
		for _, p := range pairs {
			if Secret(p.Key) {
				add(p.Value)
			}
		}
	}
	return out
}

// Pair is one key=value pair of libpq's key=value form.
type Pair struct{ Key, Value string }

// KeyValues parses libpq's key=value form ("host=db password='a b'"): pairs
// separated by spaces, spaces allowed around '=', values optionally single-quoted
// with backslash escapes. ok is false unless all of spec is such pairs, at least one.
func KeyValues(spec string) (pairs []Pair, ok bool) {
	s := strings.TrimSpace(spec)
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq <= 0 {
			return nil, false
		}
		key := strings.TrimSpace(s[:eq])
		if key == "" || strings.ContainsAny(key, " \t\n\r\f\v'\\") {
			return nil, false
		}
		s = strings.TrimLeft(s[eq+1:], " \t\n\r\f\v")
		var val strings.Builder
		if strings.HasPrefix(s, "'") {
			i, closed := 1, false
			for ; i < len(s); i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
					val.WriteByte(s[i])
					continue
				}
				if s[i] == '\'' {
					closed = true
					break
				}
				val.WriteByte(s[i])
			}
			if !closed {
				return nil, false
			}
			s = s[i+1:]
			if s != "" && !strings.ContainsAny(s[:1], " \t\n\r\f\v") {
				return nil, false
			}
		} else {
			i := 0
			for ; i < len(s) && !strings.ContainsAny(s[i:i+1], " \t\n\r\f\v"); i++ {
				if s[i] == '\\' && i+1 < len(s) {
					i++
				}
				val.WriteByte(s[i])
			}
			s = s[i:]
		}
		pairs = append(pairs, Pair{key, val.String()})
		s = strings.TrimLeft(s, " \t\n\r\f\v")
	}
	return pairs, len(pairs) > 0
}
