package main

import (
	"bytes"
	"os"
	"regexp"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

func TestMain(m *testing.M) { dynamotest.Main(m) }

// TestDynamoDBTablesFitBillingctl: the tables the quickstart creates on
// DynamoDB are those billingctl's --tables PREFIX names (PREFIX-activity,
// PREFIX-activity-history, PREFIX-locks), and the quickstart prints the
// billingctl line with that prefix.
func TestDynamoDBTablesFitBillingctl(t *testing.T) {
	endpoint := dynamotest.Endpoint(t)
	var progress bytes.Buffer
	stderr = &progress
	t.Cleanup(func() { stderr = os.Stderr })

	client, tables, cleanup, err := createTables(t.Context(), endpoint, false)
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`billingctl --endpoint (\S+) --tables (\S+) subs list USER_ID`).FindStringSubmatch(progress.String())
	if line == nil || line[1] != endpoint {
		cleanup()
		t.Fatalf("no billingctl line for %s in:\n%s", endpoint, progress.String())
	}
	p := line[2]
	want := dynamostore.TableConfig{Subscriptions: p + "-activity", History: p + "-activity-history", Locks: p + "-locks"}
	if tables != want {
		t.Errorf("tables %+v; billingctl --tables %s reads %+v", tables, p, want)
	}
	for _, name := range []string{want.Subscriptions, want.History, want.Locks} {
		if _, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(name)}); err != nil {
			t.Errorf("table %s, which billingctl --tables %s reads: %v", name, p, err)
		}
	}
	cleanup()
	if _, err := client.DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(want.Locks)}); err == nil {
		t.Errorf("table %s not deleted without -keep", want.Locks)
	}
}
