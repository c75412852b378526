package faultsim

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/dynabill/billing/dynamostore"
)

// Interleaver wraps a store's DynamoDB client: once armed, it runs a
// function right before the next write of a batch (BatchWriteItem, or
// TransactWriteItems, which AddAll writes with), synchronously, as another
// writer acting between a batch's reads and its writes.
type Interleaver struct {
	dynamostore.API

	mu     sync.Mutex
	before func(ctx context.Context)
}

var _ dynamostore.API = (*Interleaver)(nil)

// NewInterleaver wraps inner.
func NewInterleaver(inner dynamostore.API) *Interleaver { return &Interleaver{API: inner} }

func (c *Interleaver) arm(f func(ctx context.Context)) {
	c.mu.Lock()
	c.before = f
	c.mu.Unlock()
}

func (c *Interleaver) disarm() { c.arm(nil) }

// BatchWriteItem runs the armed function first, once.
func (c *Interleaver) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.fire(ctx)
	return c.API.BatchWriteItem(ctx, in, optFns...)
}

// TransactWriteItems runs the armed function first, once.
func (c *Interleaver) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.fire(ctx)
	return c.API.TransactWriteItems(ctx, in, optFns...)
}

// fire runs the armed function, once: it is disarmed first, so the
// other writer's own writes go through.
func (c *Interleaver) fire(ctx context.Context) {
	c.mu.Lock()
	f := c.before
	c.before = nil
	c.mu.Unlock()
	if f != nil {
		f(ctx)
	}
}
