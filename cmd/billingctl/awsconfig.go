package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
)

// The connection to DynamoDB: the AWS configuration and credentials, the
// client, and what billingctl says when the server cannot be reached.

// dynamo returns the DynamoDB client, made on first use.
func (a *app) dynamo() (*dynamodb.Client, error) {
	if a.client != nil {
		return a.client, nil
	}
	cfg, err := a.awsConfig()
	if err != nil {
		return nil, err
	}
	a.client = dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		if a.g.endpoint != "" {
			o.BaseEndpoint = aws.String(a.g.endpoint)
		}
	})
	return a.client, nil
}

// awsConfig loads the AWS configuration: the region of the flag, the
// environment, the shared config or us-east-1; the default credential
// chain, with dummy credentials for local servers (see the package doc).
func (a *app) awsConfig() (aws.Config, error) {
	var opts []func(*config.LoadOptions) error
	region := cmpOr(a.g.region, a.env("AWS_REGION"), a.env("AWS_DEFAULT_REGION"))
	if region != "" {
		opts = append(opts, config.WithRegion(region))
	}
	local := a.g.endpoint != "" && localEndpoint(a.g.endpoint) && a.env("AWS_ACCESS_KEY_ID") == "" && a.env("AWS_PROFILE") == ""
	if local {
		opts = append(opts, config.WithEC2IMDSClientEnableState(imds.ClientDisabled))
	}
	// The SDK's warnings go to billingctl's stderr, but not the instance
	// metadata service's: billingctl says itself what to configure.
	opts = append(opts, config.WithLogger(sdkLogger{w: a.stderr}))
	cfg, err := config.LoadDefaultConfig(a.ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("loading the AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = defaultRegion
	}
	cfg.Retryer = refusedFails(cfg.Retryer)
	// Resolve the credentials now: without any, the SDK would end each
	// call in the instance metadata service's errors (or a slow timeout);
	// say what to set instead. (On EC2 the metadata service answers well
	// within the wait.)
	wait := 3 * time.Second
	if local {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(a.ctx, wait)
	_, err = cfg.Credentials.Retrieve(ctx)
	cancel()
	switch {
	case err == nil:
	case local:
		// Local servers accept any credentials.
		cfg.Credentials = credentials.NewStaticCredentialsProvider("billingctl-local", "billingctl-local", "")
	case a.g.endpoint == "":
		return aws.Config{}, fmt.Errorf("%w (the SDK said: %v)", errNoTarget, err)
	default:
		return aws.Config{}, fmt.Errorf("no AWS credentials for the endpoint %s: configure them (AWS_PROFILE, or "+
			"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; a DynamoDB Local on another host accepts any) (the SDK said: %v)",
			a.g.endpoint, err)
	}
	return cfg, nil
}

// refusedFails returns the retryer of base (the SDK's standard one when
// nil) that does not retry a refused connection: nothing listens at the
// endpoint (a local server not started, a wrong port), and three attempts
// with backoff only delay saying so.
func refusedFails(base func() aws.Retryer) func() aws.Retryer {
	return func() aws.Retryer {
		var r aws.Retryer = retry.NewStandard()
		if base != nil {
			r = base()
		}
		if v2, ok := r.(aws.RetryerV2); ok {
			return noRetryRefused{v2}
		}
		return r
	}
}

// noRetryRefused is a retryer that does not retry a refused connection.
type noRetryRefused struct{ aws.RetryerV2 }

func (r noRetryRefused) IsErrorRetryable(err error) bool {
	return !errors.Is(err, syscall.ECONNREFUSED) && r.RetryerV2.IsErrorRetryable(err)
}

// sdkLogger prints the AWS SDK's log lines on stderr as billingctl's own,
// except those of the EC2 instance metadata service (IMDS): off EC2 they
// only say that it is not there, and a missing credential is reported by
// awsConfig, with what to set.
type sdkLogger struct{ w io.Writer }

func (l sdkLogger) Logf(c logging.Classification, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	if strings.Contains(msg, "IMDS") {
		return
	}
	fmt.Fprintf(l.w, "billingctl: AWS SDK %s: %s\n", strings.ToLower(string(c)), msg)
}

// endpointEnv names the environment variable every program of this module
// reads the DynamoDB endpoint from; the --endpoint flag wins over it.
const endpointEnv = "DYNAMODB_ENDPOINT"

// errNoTarget reports that billingctl has neither a local server nor AWS
// credentials to talk to.
var errNoTarget = errors.New("no DynamoDB to talk to: pass --endpoint URL (or set " + endpointEnv +
	") for a local server such as DynamoDB Local or moto, or configure AWS credentials " +
	"(AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) for AWS")

// localEndpoint reports whether endpoint is a local server: localhost, a
// loopback address, or a host name without dots (a container's name).
func localEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback()
	}
	return host != "" && !strings.Contains(host, ".")
}

// unreachable reports an error connecting to DynamoDB (the server refused
// the connection, its host is unknown, the dial timed out) in one line
// naming the endpoint and the cause, rather than the SDK's chain of
// operation, attempts and request.
func (a *app) unreachable(err error) (string, bool) {
	var dns *net.DNSError
	var op *net.OpError
	var cause string
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		cause = "connection refused"
	case errors.As(err, &dns):
		cause = fmt.Sprintf("unknown host %s (%s)", dns.Name, dns.Err)
	case errors.As(err, &op) && op.Op == "dial":
		cause = op.Err.Error()
	default:
		return "", false
	}
	endpoint := a.g.endpoint
	var ue *url.Error
	if endpoint == "" && errors.As(err, &ue) {
		// AWS: the regional endpoint the SDK dialled.
		if u, perr := url.Parse(ue.URL); perr == nil {
			endpoint = u.Scheme + "://" + u.Host
		}
	}
	return fmt.Sprintf("cannot reach DynamoDB at %s: %s", endpoint, cause), true
}
