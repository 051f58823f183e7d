// Package redact hides credentials in URLs before they reach a message, a
// log line, a status record or `config print`: the password of the
// userinfo, and the value of every query parameter that is not known to be
// harmless (a signed URL's X-Amz-Signature, a token=, a password=). It is
// the one place that decides what of a URL may be shown.
package redact

import (
	"net/url"
	"strings"
)

// Mask replaces a hidden value.
const Mask = "xxxxx"

// safeParams are query parameters whose values are never credentials: the
// s3:// settings and common harmless ones.
var safeParams = map[string]bool{
	"region": true, "use_path_style": true, "profile": true, "ca_file": true,
	"request_timeout": true, "max_attempts": true, "prefix": true, "versionid": true,
}

// urlParams are query parameters whose values are URLs themselves (an
// s3:// endpoint=): shown, but redacted as URLs, since a password or a
// session token can hide in their userinfo or query.
var urlParams = map[string]bool{"endpoint": true}

// URL returns s with its userinfo password and every query parameter
// value but safeParams' replaced by Mask; the values of urlParams are
// redacted as URLs in turn. A string that does not parse as
// a URL but is shaped like scheme://user:pass@host has the userinfo
// masked; anything after a "?" in it is masked too.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		out := s
		if q := strings.IndexByte(out, '?'); q >= 0 {
			out = out[:q+1] + Mask
		}
		if i := strings.Index(out, "://"); i >= 0 {
			if at := strings.LastIndex(out, "@"); at > i {
				out = out[:i+3] + Mask + "@" + out[at+1:]
			}
		}
		return out
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
		}
	}
	if u.RawQuery != "" {
		q := u.Query()
		for k, vs := range q {
			for i := range vs {
				switch lk := strings.ToLower(k); {
				case urlParams[lk]:
					vs[i] = URL(vs[i])
				case !safeParams[lk]:
					vs[i] = Mask
				}
			}
		}
		u.RawQuery = q.Encode()
	}
	if u.Fragment != "" {
		u.Fragment = Mask
	}
	return u.String()
}
