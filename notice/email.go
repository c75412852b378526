package notice

import (
	"fmt"
	"strings"
	"unicode"
)

// emailDomainRule is one entry of [WorkerConfig.AllowedEmailSuffixes].
type emailDomainRule struct {
	// domain is the entry without its "@" or "." prefix, in lower case.
	domain string
	// self and subdomains say whether the domain itself and its
	// subdomains are allowed.
	self, subdomains bool
}

// parseEmailDomainRule parses an entry of AllowedEmailSuffixes: "d" allows
// the domain d and its subdomains, "@d" only d, ".d" only d's subdomains.
func parseEmailDomainRule(entry string) (emailDomainRule, error) {
	r := emailDomainRule{self: true, subdomains: true}
	d := strings.ToLower(entry)
	switch {
	case strings.HasPrefix(d, "@"):
		d, r.subdomains = d[1:], false
	case strings.HasPrefix(d, "."):
		d, r.self = d[1:], false
	}
	if !validEmailDomain(d) {
		return r, fmt.Errorf("billing: WorkerConfig.AllowedEmailSuffixes: %q is not a domain, @domain or .domain", entry)
	}
	r.domain = d
	return r, nil
}

// allows reports whether the rule allows domain, an address's domain in
// lower case.
func (r *emailDomainRule) allows(domain string) bool {
	if domain == r.domain {
		return r.self
	}
	return r.subdomains && strings.HasSuffix(domain, "."+r.domain)
}

// emailDomain returns the domain of email in lower case, and false when
// email is not an address the filter can judge: not exactly one "@", an
// empty local part, or a domain that [validEmailDomain] refuses.
func emailDomain(email string) (string, bool) {
	local, domain, ok := strings.Cut(email, "@")
	if !ok || local == "" || strings.Contains(domain, "@") {
		return "", false
	}
	domain = strings.ToLower(domain)
	return domain, validEmailDomain(domain)
}

// validEmailDomain reports whether d is a domain name: dot-separated labels,
// none empty (so no leading or trailing dot, no ".."), of letters, digits,
// combining marks and hyphens. Anything else (an address literal, a "?",
// whitespace) is refused rather than matched.
func validEmailDomain(d string) bool {
	if d == "" {
		return false
	}
	for label := range strings.SplitSeq(d, ".") {
		if label == "" {
			return false
		}
	}
	return !strings.ContainsFunc(d, func(c rune) bool {
		return c != '.' && c != '-' && !unicode.IsLetter(c) && !unicode.IsDigit(c) && !unicode.IsMark(c)
	})
}

// emailAllowed applies the test-environment filter: with rules, the
// email's domain must be allowed by one of them.
func (w *Worker) emailAllowed(email string) bool {
	if len(w.emailRules) == 0 {
		return true
	}
	domain, ok := emailDomain(email)
	if !ok {
		return false
	}
	for i := range w.emailRules {
		if w.emailRules[i].allows(domain) {
			return true
		}
	}
	return false
}
