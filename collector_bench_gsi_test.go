package billing_test

import (
	"context"
	"math"
	"reflect"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing/dynamostore"
	"github.com/dynabill/billing/internal/dynamotest"
)

// gsiCounter passes calls on to a client and counts the index writes
// their writes cause, from the tables' key schemas (DescribeTable): an
// item entering or leaving an index is one index write, a change of an
// indexed item's index key two (a delete and a put), any other change of
// an indexed item one unless the index projects only keys. An index
// write costs a write unit per started KB of the item. It reads each
// written item before and after the write on the inner client, so the
// counting wrapper above it does not see those reads.
type gsiCounter struct {
	dynamostore.API
	mu      sync.Mutex
	schemas map[string]tableKeys
	writes  int
	wcu     float64
}

// tableKeys are a table's key attributes and its indexes' keys.
type tableKeys struct {
	key     []string
	indexes []indexKeys
}

// indexKeys are an index's key attributes and whether it projects only
// keys (then a change of other attributes costs it nothing).
type indexKeys struct {
	names    []string
	keysOnly bool
}

func newGSICounter(inner dynamostore.API) *gsiCounter {
	return &gsiCounter{API: inner, schemas: map[string]tableKeys{}}
}

func (g *gsiCounter) keys(ctx context.Context, table string) tableKeys {
	g.mu.Lock()
	defer g.mu.Unlock()
	if k, ok := g.schemas[table]; ok {
		return k
	}
	var k tableKeys
	out, err := g.API.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: &table})
	if err == nil {
		for _, e := range out.Table.KeySchema {
			k.key = append(k.key, *e.AttributeName)
		}
		for _, ix := range out.Table.GlobalSecondaryIndexes {
			var names []string
			for _, e := range ix.KeySchema {
				names = append(names, *e.AttributeName)
			}
			keysOnly := ix.Projection != nil && ix.Projection.ProjectionType == types.ProjectionTypeKeysOnly
			k.indexes = append(k.indexes, indexKeys{names, keysOnly})
		}
	}
	g.schemas[table] = k
	return k
}

// target is one item a write touches.
type target struct {
	table string
	key   map[string]types.AttributeValue
}

func (g *gsiCounter) keyOf(ctx context.Context, table string, item map[string]types.AttributeValue) target {
	key := map[string]types.AttributeValue{}
	for _, n := range g.keys(ctx, table).key {
		key[n] = item[n]
	}
	return target{table, key}
}

func (g *gsiCounter) read(ctx context.Context, t target) map[string]types.AttributeValue {
	out, err := g.API.GetItem(ctx, &dynamodb.GetItemInput{TableName: &t.table, Key: t.key, ConsistentRead: new(true)})
	if err != nil {
		return nil
	}
	return out.Item
}

// around runs write with the items of targets read before and after, and
// counts the index writes between the two states.
func (g *gsiCounter) around(ctx context.Context, targets []target, write func() error) error {
	before := make([]map[string]types.AttributeValue, len(targets))
	for i, t := range targets {
		before[i] = g.read(ctx, t)
	}
	err := write()
	for i, t := range targets {
		after := g.read(ctx, t)
		for _, ix := range g.keys(ctx, t.table).indexes {
			n := indexWrites(ix, before[i], after)
			if n == 0 {
				continue
			}
			size := max(dynamotest.ItemSize(before[i]), dynamotest.ItemSize(after))
			g.mu.Lock()
			g.writes += n
			g.wcu += float64(n) * math.Ceil(float64(max(size, 1))/1024)
			g.mu.Unlock()
		}
	}
	return err
}

// indexWrites is the number of writes an index keyed by ix takes when an
// item goes from before to after (nil: no item).
func indexWrites(k indexKeys, before, after map[string]types.AttributeValue) int {
	ix := k.names
	in := func(item map[string]types.AttributeValue) bool {
		if item == nil {
			return false
		}
		for _, n := range ix {
			if item[n] == nil {
				return false
			}
		}
		return true
	}
	was, is := in(before), in(after)
	switch {
	case !was && !is:
		return 0
	case was != is:
		return 1
	}
	for _, n := range ix {
		if !reflect.DeepEqual(before[n], after[n]) {
			return 2
		}
	}
	if k.keysOnly || reflect.DeepEqual(before, after) {
		return 0
	}
	return 1
}

func (g *gsiCounter) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.PutItemOutput, err error) {
	err = g.around(ctx, []target{g.keyOf(ctx, *in.TableName, in.Item)}, func() error {
		out, err = g.API.PutItem(ctx, in, opt...)
		return err
	})
	return out, err
}

func (g *gsiCounter) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.UpdateItemOutput, err error) {
	err = g.around(ctx, []target{{*in.TableName, in.Key}}, func() error {
		out, err = g.API.UpdateItem(ctx, in, opt...)
		return err
	})
	return out, err
}

func (g *gsiCounter) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.DeleteItemOutput, err error) {
	err = g.around(ctx, []target{{*in.TableName, in.Key}}, func() error {
		out, err = g.API.DeleteItem(ctx, in, opt...)
		return err
	})
	return out, err
}

func (g *gsiCounter) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opt ...func(*dynamodb.Options)) (out *dynamodb.TransactWriteItemsOutput, err error) {
	var ts []target
	for _, it := range in.TransactItems {
		switch {
		case it.Put != nil:
			ts = append(ts, g.keyOf(ctx, *it.Put.TableName, it.Put.Item))
		case it.Update != nil:
			ts = append(ts, target{*it.Update.TableName, it.Update.Key})
		case it.Delete != nil:
			ts = append(ts, target{*it.Delete.TableName, it.Delete.Key})
		}
	}
	err = g.around(ctx, ts, func() error {
		out, err = g.API.TransactWriteItems(ctx, in, opt...)
		return err
	})
	return out, err
}

func (g *gsiCounter) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, opt ...func(*dynamodb.Options)) (out *dynamodb.BatchWriteItemOutput, err error) {
	var ts []target
	for table, reqs := range in.RequestItems {
		for _, r := range reqs {
			switch {
			case r.PutRequest != nil:
				ts = append(ts, g.keyOf(ctx, table, r.PutRequest.Item))
			case r.DeleteRequest != nil:
				ts = append(ts, target{table, r.DeleteRequest.Key})
			}
		}
	}
	err = g.around(ctx, ts, func() error {
		out, err = g.API.BatchWriteItem(ctx, in, opt...)
		return err
	})
	return out, err
}

// total returns the index writes and their write units so far, and
// starts counting again.
func (g *gsiCounter) total() (writes int, wcu float64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	writes, wcu = g.writes, g.wcu
	g.writes, g.wcu = 0, 0
	return writes, wcu
}
