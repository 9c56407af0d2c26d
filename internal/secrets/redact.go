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
	if urlForm.MatchString(s) && (!strings.ContainsAny(strings.TrimSpace(s), " \t\n") || pgSpec.MatchString(s)) {
		// A PostgreSQL spec with a space is one spec whose password holds a raw space
		// (postgres://app:p w@db/x): it does not parse, and is hidden up to its last '@'.
		return redactURL(s)
	}
	if m := bareUserInfo.FindStringSubmatch(s); m != nil {
		// user:PW@host without a scheme (a DSN whose postgres:// was forgotten).
		return m[1] + Mask + m[3]
	}
	if _, ok := KeyValues(s); ok {
		return redactPairs(s) // a libpq DSN: its quoted values may hold anything
	}
	// Text: URLs in it one by one, key=value pairs in the rest.
	var b strings.Builder
	last := 0
	for _, m := range urlInText.FindAllStringIndex(s, -1) {
		b.WriteString(redactText(s[last:m[0]]))
		b.WriteString(redactURL(s[m[0]:m[1]]))
		last = m[1]
	}
	b.WriteString(redactText(s[last:]))
	return b.String()
}

// redactText hides the secrets of text that holds no URL: key=value pairs, JSON
// fields, Authorization headers and bearer tokens, and command-line flags with a
// secret's name followed by their value (a stdio MCP server's command).
func redactText(s string) string {
	s = redactPairs(s)
	mask := func(re *regexp.Regexp, s string, keep func(sub []string) bool) string {
		return re.ReplaceAllStringFunc(s, func(m string) string {
			sub := re.FindStringSubmatch(m)
			if keep(sub) {
				return m
			}
			return sub[1] + Mask + sub[len(sub)-1]
		})
	}
	if strings.Contains(s, ":") {
		s = mask(jsonPair, s, func(sub []string) bool { return !Secret(sub[2]) })
	}
	s = mask(bearer, s, func(sub []string) bool { return !tokenLike(sub[2]) })
	s = mask(flagValue, s, func(sub []string) bool {
		return !Secret(strings.TrimLeft(sub[2], "-")) || !tokenLike(sub[3])
	})
	return s
}

// tokenLike reports whether v may be a secret rather than a word of a sentence: it
// has a character other than a letter, or is long.
func tokenLike(v string) bool {
	if len(v) >= 12 {
		return true
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return true
		}
	}
	return false
}

// jsonPair matches a JSON field with a string value ("password":"PW").
var jsonPair = regexp.MustCompile(`("([^"\\]{1,64})"\s*:\s*")((?:[^"\\]|\\.)*)(")`)

// bearer matches the credential of an Authorization header or a bearer token.
var bearer = regexp.MustCompile(`(?i)((?:\bauthorization\s*:\s*(?:[a-z]+\s+)?|\bbearer\s+))([^\s"',;]+)()`)

// flagValue matches a command-line flag and the value after it (--api-key KEY).
var flagValue = regexp.MustCompile(`((?:^|\s)(--?[A-Za-z][\w.-]*)\s+)([^\s-][^\s]*)()`)

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
	if n == "key" || n == "code" || n == "pass" || n == "pw" { // Google's ?key=API_KEY; an OAuth authorization code
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
var secretWords = []string{"password", "passwd", "passphrase", "pwd", "token", "secret", "apikey", "accesskey", "privatekey",
	"clientkey", "signature", "credential", "auth", "sessionid", "sig", "jwt", "bearer", "cookie"}

// bareUserInfo matches a whole string that is user:password@host... without a
// scheme; the password runs to the last '@'.
var bareUserInfo = regexp.MustCompile(`^(\s*[^\s/:@=]+:)(\S*)(@[^\s@]*\s*)$`)

// pgSpec matches a PostgreSQL URL with user info.
var pgSpec = regexp.MustCompile(`(?i)^\s*postgres(?:ql)?://[^/?#]*:[^@]*@`)

// urlForm matches a string in URL form: a scheme, then "://".
var urlForm = regexp.MustCompile(`^\s*[A-Za-z][A-Za-z0-9+.-]*://`)

// urlInText matches a URL inside text, up to a space or a quote.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.-]*://[^\s"'<>` + "`" + `]+`)

// kvPair matches a key=value pair; the value is quoted ('...' as in libpq's form,
// or "..." as in logfmt, with backslash escapes, possibly unterminated) or runs to
// the next space.
var kvPair = regexp.MustCompile(`([A-Za-z_][\w.-]*)(\s*=\s*)('(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|(?:[^\s\\]|\\.)*\\?)`)

func redactPairs(s string) string {
	if !strings.Contains(s, "=") {
		return s
	}
	return kvPair.ReplaceAllStringFunc(s, func(m string) string {
		sub := kvPair.FindStringSubmatch(m)
		if !Secret(sub[1]) {
			v := sub[3]
			inner := strings.TrimLeft(v, `"'`)
			switch {
			case urlForm.MatchString(inner):
				// A URL as the value (mcp=http://u:PW@host/mcp), quoted or not.
				open := v[:len(v)-len(inner)]
				u := strings.TrimRight(inner, `"'`)
				return sub[1] + sub[2] + open + redactURL(u) + inner[len(u):]
			case inner == v && strings.Contains(v, "="):
				// A query string or form body: a=b&password=PW. (Not redactPairs again:
				// nested, it took time quadratic in the length of a=a=a=….)
				return sub[1] + sub[2] + redactQuery(v)
			}
			return m
		}
		return sub[1] + sub[2] + Mask
	})
}

func redactURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || u.Opaque != "" || rawUserInfo(u, s) {
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
		switch p, ok := u.User.Password(); {
		case ok && p == "" && u.User.Username() != "" && webSchemes[strings.ToLower(u.Scheme)]:
			// The key is the user name (Stripe's basic auth: https://sk_live_…:@host).
			u.User = url.UserPassword(Mask, "")
		case ok:
			u.User = url.UserPassword(u.User.Username(), Mask)
		case webSchemes[strings.ToLower(u.Scheme)] && u.User.Username() != "":
			// A token as the user name (https://TOKEN@github.com/…): web servers take no
			// other kind of user name in a URL.
			u.User = url.User(Mask)
		}
	}
	u.RawQuery = redactQuery(u.RawQuery)
	u.Fragment, u.RawFragment = redactFragment(u.Fragment), ""
	return u.String()
}

var webSchemes = map[string]bool{"http": true, "https": true, "ws": true, "wss": true}

// rawUserInfo reports whether a PostgreSQL URL that parsed without user info has
// an '@' later on: a password written with a raw '#', '?' or '/' in it
// (postgres://app:12#PW@db/x parses as host "app:12" and fragment "PW@db/x").
func rawUserInfo(u *url.URL, s string) bool {
	if u.User != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "postgres", "postgresql":
		_, rest, _ := strings.Cut(s, "://")
		return strings.Contains(rest, "@")
	}
	return false
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
	// Parameters are separated by '&', or by '\u0026' as encoding/json writes it.
	var b strings.Builder
	for len(q) > 0 {
		end, next := len(q), len(q)
		if i := querySep.FindStringIndex(q); i != nil {
			end, next = i[0], i[1]
		}
		p := q[:end]
		k, _, ok := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil {
			k = uk
		}
		if ok && Secret(k) {
			p = p[:strings.Index(p, "=")+1] + Mask
		}
		b.WriteString(p)
		b.WriteString(q[end:next])
		q = q[next:]
	}
	if !found {
		return b.String()
	}
	return head + "?" + b.String()
}

// querySep matches a separator of query parameters.
var querySep = regexp.MustCompile(`&|\\u0026`)

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
