package notice_test

import (
	"context"
	"testing"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/notice"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkerEmailAllowList: AllowedEmailSuffixes matches whole domains,
// case-insensitively: "d" the domain and its subdomains, "@d" the domain
// only, ".d" its subdomains only; never part of a label, and never an
// address it cannot split into one local part and one plain domain.
func TestWorkerEmailAllowList(t *testing.T) {
	domainAndSubs := []string{"example.com"}
	domainOnly := []string{"@example.com"}
	subsOnly := []string{".example.com"}
	for _, tc := range []struct {
		allowed []string
		email   string
		sent    bool
	}{
		{domainAndSubs, "a@example.com", true},
		{domainAndSubs, "a@mail.example.com", true},
		{domainAndSubs, "a@deep.mail.example.com", true},
		{domainAndSubs, "A@EXAMPLE.COM", true},
		{domainAndSubs, "a@Mail.Example.Com", true},
		{[]string{"EXAMPLE.Com"}, "a@example.com", true},
		{domainAndSubs, "a@notexample.com", false},
		{domainAndSubs, "a@mail.notexample.com", false},
		{domainAndSubs, "a@example.com.evil.org", false},
		{domainAndSubs, "a@example.co", false},
		{domainAndSubs, "example.com@evil.org", false},
		{domainAndSubs, "a@evil.org?@example.com", false},
		{domainAndSubs, "a@b@example.com", false},
		{domainAndSubs, "a@evil.org?.example.com", false},
		{domainAndSubs, "a@evil.org/.example.com", false},
		{domainAndSubs, "a@example.com.", false},
		{domainAndSubs, "a@.example.com", false},
		{domainAndSubs, "a@mail..example.com", false},
		{domainAndSubs, "a@example.com ", false},
		{domainAndSubs, "a@example.com\n", false},
		{domainAndSubs, "a@[127.0.0.1]", false},
		{domainAndSubs, "@example.com", false},
		{domainAndSubs, "a@", false},
		{domainAndSubs, "example.com", false},
		{domainAndSubs, "", false},
		{domainOnly, "a@example.com", true},
		{domainOnly, "a@EXAMPLE.com", true},
		{domainOnly, "a@mail.example.com", false},
		{domainOnly, "a@notexample.com", false},
		{subsOnly, "a@mail.example.com", true},
		{subsOnly, "a@example.com", false},
		{subsOnly, "a@mail.notexample.com", false},
		{[]string{"test.example.com", "qa.example.org"}, "a@test.example.com", true},
		{[]string{"test.example.com", "qa.example.org"}, "a@x.qa.example.org", true},
		{[]string{"test.example.com", "qa.example.org"}, "a@example.com", false},
		{[]string{"test.example.com", "qa.example.org"}, "a@qa.example.org.evil.org", false},
		{nil, "anyone@anywhere.org", true}, // no list: production
	} {
		e := newNotifEnv(t)
		e.step.Policy = nil
		e.cfg.AllowedEmailSuffixes = tc.allowed
		e.users.Put(billing.User{ID: "u1", Email: tc.email, Status: billing.UserStatusActive})
		out, err := e.worker(t).Handle(context.Background(), notifMessage())
		require.NoError(t, err, "%q with %q", tc.email, tc.allowed)
		want, wantSent := notice.SkippedTestEnvironment, 0
		if tc.sent {
			want, wantSent = notice.Sent, 1
		}
		assert.Equal(t, want, out, "%q with %q", tc.email, tc.allowed)
		assert.Len(t, e.notifier.Sent(), wantSent, "%q with %q: sent %v", tc.email, tc.allowed, e.notifier.Sent())
	}
}

// TestNewWorkerRejectsNonDomainEntries: an entry that is not a domain,
// "@domain" or ".domain" is a configuration error, not a filter that
// silently matches nobody (or, as a bare suffix did, too many).
func TestNewWorkerRejectsNonDomainEntries(t *testing.T) {
	e := newNotifEnv(t)
	for _, entry := range []string{"", "@", ".", "example.com.", "..example.com", "@.example.com", ".@example.com",
		"+qa@example.com", "a@example.com", "example .com", "*.example.com", "example.com/"} {
		cfg := e.cfg
		cfg.AllowedEmailSuffixes = []string{"example.org", entry}
		_, err := notice.NewWorker(cfg)
		assert.ErrorContains(t, err, "AllowedEmailSuffixes", "entry %q", entry)
	}
	for _, entry := range []string{"example.com", "@example.com", ".example.com", "EXAMPLE.COM", "xn--bcher-kva.example", "bücher.example", "my-host.example"} {
		cfg := e.cfg
		cfg.AllowedEmailSuffixes = []string{entry}
		_, err := notice.NewWorker(cfg)
		assert.NoError(t, err, "entry %q", entry)
	}
}
