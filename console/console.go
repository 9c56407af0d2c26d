// Package console is idemgate's operator page: an http.Handler that shows the
// writes waiting on a person (blocked first, with the withheld call and what the
// witnesses said), a key's story, a workflow's writes, the census of classes and
// the pauses, and settles keys and pauses writes from a browser — each action
// exactly the store call and receipt of the matching `idemgate` command
// (internal/operate is their one code path), with the console user as the actor.
//
// Mount it in a server of your own, or run `idemgate console --store … --listen
// 127.0.0.1:PORT`. It reads the store on every request (nothing is cached), so it
// is live while workers run.
//
// # Who may reach it
//
// By default the handler answers only requests from a loopback address whose Host
// header names a loopback host (so a web page elsewhere cannot reach it through DNS
// rebinding) and that carry no proxy header (Forwarded, X-Forwarded-For,
// X-Forwarded-Host, X-Real-IP: a reverse proxy on the same machine makes every
// request look local); anything else gets 403. To serve it to others, either
//
//   - set Options.Token: every request must carry it (a login form sets an
//     HttpOnly cookie; scripts may send "Authorization: Bearer TOKEN"). Read the
//     token from a file or the environment, never from a command-line flag; or
//   - set Options.AuthenticatedByServer when the server that mounts the handler
//     authenticates every request before it reaches the handler (your SSO
//     proxy, your middleware). The handler then trusts the request as it comes,
//     and names the actor from Options.ActorHeader: that header must be one your
//     server sets and strips from what clients send.
//
// # What protects an action
//
// Every POST carries a CSRF token bound to the browser's session cookie (an HMAC
// under a key made when the handler is; a POST without it, or with another
// session's, is refused and changes nothing); a POST whose Origin is another site is
// refused. Responses carry a Content-Security-Policy that allows no inline script
// or style, X-Frame-Options DENY and X-Content-Type-Options nosniff. Every value
// from the store — arguments, errors, workflow IDs are text from outside — is
// HTML-escaped by html/template and has its control and bidirectional characters
// shown as escapes (\x1b, \u202e), as the CLI shows them. ReadOnly hides the
// actions and refuses their POSTs. No page and no log line shows the token.
package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemgate/idemgate/interceptor"
	"github.com/idemgate/idemgate/store"
)

// Options configures the handler. The zero value serves loopback only, with
// actions, without a Temporal UI link.
type Options struct {
	// TemporalUIBase is the Temporal UI's root (e.g. http://localhost:8233): each
	// workflow links to {base}/namespaces/{Namespace}/workflows/{id}/{run}.
	// Optional: "" shows no link. It must be an http or https URL.
	TemporalUIBase string
	// Namespace is the workers' Temporal namespace, for the links (records do not
	// carry it). Optional: "default".
	Namespace string
	// ReadOnly hides the actions and refuses them.
	ReadOnly bool
	// Token, when set, is required of every request (see the package doc). At
	// least 16 bytes, without white space at its ends (a person types it).
	Token []byte
	// AuthenticatedByServer says the server that mounts the handler authenticates
	// every request before it: the handler then serves any address without a token.
	AuthenticatedByServer bool
	// ActorHeader names the request header that carries the console user's name,
	// set by the embedding server (e.g. X-Forwarded-User): receipts name that user
	// as the actor. It needs AuthenticatedByServer (Handler refuses it alone: the
	// header would be the client's word). Optional: without it, or when a request
	// lacks it, the actor is "console".
	ActorHeader string
	// Window is how long a result settled as sent is remembered: the workers'
	// Options.Window. Optional: interceptor.DefaultWindow.
	Window time.Duration
	// Refresh is how often an open page reloads what it shows (with JavaScript; a
	// page read without it is reloaded by hand). Optional: 5 s.
	Refresh time.Duration
	// Now is the clock. Optional: time.Now.
	Now func() time.Time
	// Logger receives one line per action and per refused request. Optional: discarded.
	Logger *slog.Logger
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// maxForm is the largest form body a POST may carry.
const maxForm = 4 << 20

// minToken is the shortest token accepted.
const minToken = 16

// Handler returns the console serving st. It reads st on every request.
func Handler(st store.Store, opts Options) (http.Handler, error) {
	if st == nil {
		return nil, errors.New("idemgate/console: Handler needs a store (store/sqlite, store/postgres or internal/storeopen)")
	}
	if opts.TemporalUIBase != "" {
		u, err := url.Parse(opts.TemporalUIBase)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("idemgate/console: Options.TemporalUIBase %q is not an http(s) URL. Next step: give the "+
				"Temporal UI's root, e.g. http://localhost:8233", opts.TemporalUIBase)
		}
		opts.TemporalUIBase = strings.TrimRight(opts.TemporalUIBase, "/")
	}
	if len(opts.Token) > 0 && strings.TrimSpace(string(opts.Token)) != string(opts.Token) {
		return nil, errors.New("idemgate/console: Options.Token starts or ends with white space (a newline from a file?), " +
			"which nobody can type into the sign-in form. Next step: trim it (strings.TrimSpace)")
	}
	if len(opts.Token) > 0 && len(opts.Token) < minToken {
		return nil, fmt.Errorf("idemgate/console: Options.Token is %d bytes; use at least %d (e.g. `openssl rand -hex 32`)", len(opts.Token), minToken)
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Window < 0 || opts.Refresh < 0 {
		return nil, errors.New("idemgate/console: Options.Window and Options.Refresh must not be negative")
	}
	if opts.ActorHeader != "" && !opts.AuthenticatedByServer {
		// Without a server that sets it after authenticating the user, the header is
		// the client's word: any token holder (or, on loopback, any local process)
		// would name any actor in the receipts.
		return nil, fmt.Errorf("idemgate/console: Options.ActorHeader %q is trusted only from a server that authenticates "+
			"every request and sets it (Options.AuthenticatedByServer). Next step: set AuthenticatedByServer when your "+
			"server sets the header, or leave ActorHeader empty (the actor is then \"console\")", opts.ActorHeader)
	}
	if opts.Window == 0 {
		opts.Window = interceptor.DefaultWindow
	}
	if opts.Refresh == 0 {
		opts.Refresh = 5 * time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h := &handler{st: st, opts: opts, key: make([]byte, 32)}
	if _, err := rand.Read(h.key); err != nil {
		return nil, err
	}
	if err := h.parseTemplates(); err != nil {
		return nil, err
	}
	static, err := fs.Sub(staticFS, "static")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /{$}", h.index)
	mux.HandleFunc("GET /key", h.key_)
	mux.HandleFunc("GET /workflow", h.workflow)
	mux.HandleFunc("GET /census", h.census)
	mux.HandleFunc("GET /pauses", h.pauses)
	mux.HandleFunc("GET /login", h.loginPage)
	mux.HandleFunc("POST /login", h.login)
	mux.HandleFunc("POST /settle", h.action(h.settle))
	mux.HandleFunc("POST /pause", h.action(h.pause))
	mux.HandleFunc("POST /resume", h.action(h.resume))
	return &guarded{h: h, next: mux}, nil
}

type handler struct {
	st    store.Store
	opts  Options
	key   []byte // HMAC key for session-bound CSRF tokens and the auth cookie
	pages map[string]*pageTemplate
}

// Cookie names.
const (
	sessionCookie = "idemgate_console_session"
	authCookie    = "idemgate_console_auth"
)

// csp allows the page's own script and style files and nothing inline.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; " +
	"form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// guarded sets the security headers, lets through only who may reach the console
// (see the package doc), checks CSRF on every POST and gives the browser its
// session.
type guarded struct {
	h    *handler
	next http.Handler
}

func (g *guarded) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, next := g.h, g.next
	{
		hd := w.Header()
		hd.Set("Content-Security-Policy", csp)
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		if why := h.reach(r); why != "" {
			h.refuse(w, r, http.StatusForbidden, why)
			return
		}
		sid := h.session(w, r)
		if r.Method == http.MethodPost {
			if code, why := h.csrfProblem(r, sid); why != "" {
				h.refuse(w, r, code, why)
				return
			}
		}
		if len(h.opts.Token) > 0 && !h.authorized(r) && !strings.HasPrefix(r.URL.Path, "/static/") && r.URL.Path != "/login" {
			if r.Method == http.MethodGet && r.Header.Get("Authorization") == "" {
				seeOther(w, "login")
				return
			}
			h.refuse(w, r, http.StatusUnauthorized, "this console needs its token: sign in at /login, or send Authorization: Bearer TOKEN")
			return
		}
		next.ServeHTTP(w, r.WithContext(withSession(r.Context(), sid)))
	}
}

// reach says why r may not reach the console at all, or "".
func (h *handler) reach(r *http.Request) string {
	if len(h.opts.Token) > 0 || h.opts.AuthenticatedByServer {
		return ""
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return "this console serves loopback only: give it a token (idemgate console --token-file, Options.Token) or mount it behind your server's authentication (Options.AuthenticatedByServer)"
	}
	for _, hd := range []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Real-Ip"} {
		if r.Header.Get(hd) != "" {
			// A proxy on this machine makes every request it passes look local.
			return "this console serves loopback only, and this request came through a proxy (it carries " + hd + "): " +
				"the proxy would let anyone it serves act here. Give the console a token (idemgate console --token-file, " +
				"Options.Token), or mount it behind your server's authentication (Options.AuthenticatedByServer)"
		}
	}
	if !loopbackHost(r.Host) {
		return "this console serves loopback only, and the Host header names another host (a DNS-rebinding page?): open it as http://127.0.0.1:PORT/ or http://localhost:PORT/"
	}
	return ""
}

func loopbackHost(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	host = strings.Trim(host, "[]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// session returns the browser's session ID, setting a new one when it has none.
func (h *handler) session(w http.ResponseWriter, r *http.Request) string {
	if c, err := r.Cookie(sessionCookie); err == nil && len(c.Value) == 32 {
		if _, err := hex.DecodeString(c.Value); err == nil {
			return c.Value
		}
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	sid := hex.EncodeToString(b)
	if r.Method == http.MethodGet {
		http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: sid, Path: "/", HttpOnly: true,
			SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	}
	return sid
}

func (h *handler) mac(parts ...string) string {
	m := hmac.New(sha256.New, h.key)
	for _, p := range parts {
		m.Write([]byte(p))
		m.Write([]byte{0})
	}
	return hex.EncodeToString(m.Sum(nil))
}

// csrfToken is the CSRF token of session sid.
func (h *handler) csrfToken(sid string) string { return h.mac("csrf", sid) }

// csrfProblem says why a POST of session sid is refused, with the status, or "".
func (h *handler) csrfProblem(r *http.Request, sid string) (int, string) {
	if o := r.Header.Get("Origin"); o != "" && o != "null" {
		u, err := url.Parse(o)
		if err != nil || !strings.EqualFold(u.Host, r.Host) {
			return http.StatusForbidden, "refused: the request came from another site (Origin " + o + "); nothing changed"
		}
	}
	r.Body = http.MaxBytesReader(nil, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		if mb := new(http.MaxBytesError); errors.As(err, &mb) {
			return http.StatusRequestEntityTooLarge, fmt.Sprintf("refused: the form is too large (over %d MiB; a result "+
				"is at most %d bytes, the largest the gate stores); nothing changed", maxForm>>20, interceptor.DefaultMaxResultSize)
		}
		return http.StatusBadRequest, "refused: the form could not be read; nothing changed"
	}
	got := r.PostForm.Get("csrf")
	if got == "" || !hmac.Equal([]byte(got), []byte(h.csrfToken(sid))) {
		return http.StatusForbidden, "refused: the form carries no valid CSRF token for this browser session (reload the page and try again); nothing changed"
	}
	return 0, ""
}

// authorized reports whether r carries the token (a Bearer header or the cookie
// the login form sets).
func (h *handler) authorized(r *http.Request) bool {
	if a := r.Header.Get("Authorization"); strings.HasPrefix(a, "Bearer ") {
		return hmac.Equal([]byte(strings.TrimPrefix(a, "Bearer ")), h.opts.Token)
	}
	c, err := r.Cookie(authCookie)
	return err == nil && hmac.Equal([]byte(c.Value), []byte(h.mac("auth", string(h.opts.Token))))
}

func (h *handler) refuse(w http.ResponseWriter, r *http.Request, code int, why string) {
	h.opts.Logger.Warn("idemgate console: request refused", "method", r.Method, "path", r.URL.Path,
		"remote", r.RemoteAddr, "status", code, "why", why)
	hd := w.Header()
	hd.Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, "idemgate console: "+why)
}

// action wraps a POST handler: refused in read-only mode.
func (h *handler) action(f http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.opts.ReadOnly {
			h.refuse(w, r, http.StatusForbidden, "this console is read-only: actions are off (nothing changed); use `idemgate resolve` / `idemgate pause`, or a console without --read-only")
			return
		}
		f(w, r)
	}
}

// actor is the console user of r.
func (h *handler) actor(r *http.Request) string {
	if h.opts.ActorHeader != "" {
		if v := strings.TrimSpace(r.Header.Get(h.opts.ActorHeader)); v != "" {
			v = strings.ToValidUTF8(v, "\uFFFD")
			for len(v) > 200 { // cut between characters: a receipt's actor stays UTF-8
				_, n := utf8.DecodeLastRuneInString(v)
				v = v[:len(v)-n]
			}
			return v
		}
	}
	return "console"
}

func (h *handler) loginPage(w http.ResponseWriter, r *http.Request) {
	if len(h.opts.Token) == 0 {
		seeOther(w, "./")
		return
	}
	h.render(w, r, http.StatusOK, "login", nil)
}

func (h *handler) login(w http.ResponseWriter, r *http.Request) {
	if len(h.opts.Token) == 0 {
		seeOther(w, "./")
		return
	}
	if !hmac.Equal([]byte(strings.TrimSpace(r.PostForm.Get("token"))), h.opts.Token) {
		h.opts.Logger.Warn("idemgate console: sign-in refused: wrong token", "remote", r.RemoteAddr)
		h.render(w, r, http.StatusUnauthorized, "login", map[string]any{"Error": "That is not the console's token."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: authCookie, Value: h.mac("auth", string(h.opts.Token)), Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	seeOther(w, "./")
}

// seeOther redirects to loc relative to the page (the handler may be mounted under
// a prefix: its links and redirects are relative, and every page is one level deep).
func seeOther(w http.ResponseWriter, loc string) {
	w.Header().Set("Location", loc)
	w.WriteHeader(http.StatusSeeOther)
}
