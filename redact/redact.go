// Package redact hides the secrets of URLs before they are printed: in
// errors, logs, metrics and health reports. It is the one place that knows
// what a secret in a URL looks like, for every scheme (remote object-store
// URLs, Redis URLs, endpoints nested in a query).
//
// It works on the text, not on a parsed URL: a URL that fails to parse
// (and whose parse error would echo it) is redacted as well as one that
// parses, and a password holding '/', '?', '#' or '@' is hidden whole.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces every hidden part.
const Mask = "***"

// secretWords are the substrings of a query parameter's name (lower case,
// '-' and '_' removed) that mark its value as a credential.
var secretWords = []string{
	"secret", "password", "passwd", "pwd", "token", "cred", "accesskey", "apikey",
	"accountkey", "privatekey", "session", "sas", "sig", "auth",
}

// SecretParam reports whether a query parameter's name marks its value as a
// credential (access_key, secret_key, sas_token, password, token, sig,
// X-Amz-Credential, …).
func SecretParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	low := strings.NewReplacer("-", "", "_", "", ".", "").Replace(strings.ToLower(name))
	for _, w := range secretWords {
		if strings.Contains(low, w) {
			return true
		}
	}
	return false
}

// URL returns s with its secrets replaced by Mask: the user information
// (everything between "://" and the last '@'; the user name stays when a
// password follows it and it holds no URL delimiter, and a lone Redis ACL
// user name stays), and the value of every
// query parameter that SecretParam names or that itself holds user
// information. Anything else is kept, so that the URL still says where it
// points. s need not be a valid URL; text without "://" is treated as the
// part after it.
func URL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest = "", s
	}
	rest = redactQuery(rest)
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		rest = userInfo(scheme, rest[:at]) + rest[at:]
	}
	if !ok {
		return rest
	}
	return scheme + "://" + rest
}

// userInfo returns the user information ui of a URL of scheme with its
// password hidden. A user information without ':' is hidden whole (on
// https://TOKEN@host it is the credential), except on redis:// and
// rediss://, where it is the ACL user name.
func userInfo(scheme, ui string) string {
	user, _, hasPass := strings.Cut(ui, ":")
	plain := !strings.ContainsAny(user, "/?#&=@%")
	switch {
	case hasPass && plain:
		return user + ":" + Mask
	case !hasPass && plain && ui != "" && (strings.EqualFold(scheme, "redis") || strings.EqualFold(scheme, "rediss")):
		return ui
	}
	return Mask
}

// redactQuery hides the secret values of the query in rest (from its first
// '?': a '?' inside a password only makes more of the text a "query", whose
// user information is hidden next anyway).
func redactQuery(rest string) string {
	head, query, ok := strings.Cut(rest, "?")
	if !ok {
		return rest
	}
	query, frag, hasFrag := strings.Cut(query, "#")
	parts := strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' })
	seps := separators(query)
	var b strings.Builder
	b.WriteString(head)
	b.WriteByte('?')
	for i, p := range parts {
		if i > 0 {
			b.WriteByte(seps[i-1])
		}
		name, val, hasVal := strings.Cut(p, "=")
		switch {
		case !hasVal:
			b.WriteString(p)
		case SecretParam(name):
			b.WriteString(name + "=" + Mask)
		default:
			b.WriteString(name + "=" + nested(val))
		}
	}
	if hasFrag {
		b.WriteString("#" + frag)
	}
	return b.String()
}

// separators returns the '&' and ';' of query in order, one between each
// two non-empty parts (runs collapse to their first).
func separators(query string) []byte {
	var out []byte
	prev := true
	for i := 0; i < len(query); i++ {
		c := query[i]
		if c == '&' || c == ';' {
			if !prev {
				out = append(out, c)
			}
			prev = true
			continue
		}
		prev = false
	}
	return out
}

// nested redacts a query value that is itself a URL with user information
// (endpoint=http://user:pass@host), escaped or not.
func nested(val string) string {
	plain, err := url.QueryUnescape(val)
	if err != nil {
		plain = val
	}
	if !strings.Contains(plain, "@") {
		return val
	}
	r := URL(plain)
	if plain == val {
		return r
	}
	return url.QueryEscape(r)
}

// Secrets returns the secret parts of s (its password or whole user
// information, and the values URL would hide), raw and unescaped, each at
// least four bytes long, for Scrub: text that did not go through URL (a
// driver's error quoting its input) can still be cleaned of them.
func Secrets(s string) []string {
	var out []string
	add := func(v string) {
		for _, x := range []string{v, unescape(v)} {
			if len(x) >= 4 {
				out = append(out, x)
			}
		}
	}
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		scheme, rest = "", s
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		ui := rest[:at]
		if user, pass, hasPass := strings.Cut(ui, ":"); hasPass && !strings.ContainsAny(user, "/?#&=@%") {
			add(pass)
		} else if userInfo(scheme, ui) == Mask {
			add(ui)
		}
	}
	if _, query, ok := strings.Cut(rest, "?"); ok {
		for _, p := range strings.FieldsFunc(query, func(r rune) bool { return r == '&' || r == ';' || r == '#' }) {
			if name, val, ok := strings.Cut(p, "="); ok && SecretParam(name) {
				add(val)
			}
		}
	}
	return out
}

func unescape(s string) string {
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}

// Scrub returns text with every occurrence of each secret replaced by Mask.
func Scrub(text string, secrets ...string) string {
	for _, sec := range secrets {
		if sec != "" {
			text = strings.ReplaceAll(text, sec, Mask)
		}
	}
	return text
}
