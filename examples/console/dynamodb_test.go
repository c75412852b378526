package main

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/require"

	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestConsoleOnDynamoDB serves the console as -endpoint does, on the local
// DynamoDB server (moto, which the harness starts; under CI=true the test
// fails without it), reads every page, a declined charge's invoice PDF, and
// waives a declined period through the confirmation form.
func TestConsoleOnDynamoDB(t *testing.T) {
	ctx := context.Background()
	endpoint := dynamotest.Endpoint(t)
	prefix := dynamotest.TableName(t, "console")
	client := dynamotest.Client(t)
	// The names billingctl --tables prefix reads.
	names := []string{prefix + "-activity", prefix + "-activity-history", prefix + "-locks", prefix + "-invoices"}
	t.Cleanup(func() {
		for _, name := range names {
			_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
		}
	})
	d, err := build(ctx, options{Endpoint: endpoint, TablePrefix: prefix, Users: 12, Months: 1, Seed: 3, DeclineRate: 0.4})
	require.NoError(t, err)
	for _, name := range names {
		_, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		require.NoError(t, err, "table %s, which billingctl --tables %s reads", name, prefix)
	}
	console, err := d.console("operator")
	require.NoError(t, err)
	srv := httptest.NewServer(mount(console))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	get := func(path string) string {
		t.Helper()
		res, err := c.Get(srv.URL + "/billing/" + path)
		require.NoError(t, err)
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		require.Equal(t, http.StatusOK, res.StatusCode, string(b))
		return string(b)
	}
	require.Contains(t, get(""), `<svg id="revenue"`)
	require.Contains(t, get("attention"), `id="errors"`)
	p, err := d.repo.QueryStatus(ctx, billing.StatusQuery{Status: billing.StatusError})
	require.NoError(t, err)
	require.NotEmpty(t, p.Items, "declines on DynamoDB")
	s := p.Items[0]
	cust := get("customer?user=" + url.QueryEscape(s.UserID))
	require.Contains(t, cust, "payment_declined")
	// The declined charge's invoice, open, from the invoices table, and
	// its PDF.
	require.Contains(t, cust, `<span class="status open">open</span>`)
	pdf := regexp.MustCompile(`<a class="pdf" href="([^"]+)">PDF</a>`).FindStringSubmatch(cust)
	require.NotNil(t, pdf, "a link to an invoice's PDF")
	res, err := c.Get(srv.URL + "/billing/" + html.UnescapeString(pdf[1]))
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(b))
	require.Equal(t, "application/pdf", res.Header.Get("Content-Type"))
	require.True(t, strings.HasPrefix(string(b), "%PDF-"))
	page := get("confirm?" + url.Values{"user": {s.UserID}, "period": {s.SubscriptionID}, "op": {"waive"}}.Encode())
	tok := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, tok)
	key := regexp.MustCompile(`name="key" value="([^"]+)"`).FindStringSubmatch(page)
	require.NotNil(t, key, "a waive is keyed")
	form := url.Values{"csrf": {tok[1]}, "op": {"waive"}, "user": {s.UserID}, "period": {s.SubscriptionID},
		"key": {html.UnescapeString(key[1])}, "reason": {"test: waive on DynamoDB"}}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/billing/action", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	res, err = c.Do(req)
	require.NoError(t, err)
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode, string(b)) // after the 303
	require.Contains(t, string(b), "Waive done")
	require.Contains(t, string(b), `<span class="status void">void</span>`, "the waive voided the open invoice")
	got, err := d.repo.GetByID(ctx, s.SubscriptionID)
	require.NoError(t, err)
	require.Equal(t, billing.StatusWaived, got.Status)
}
