package dynamostore

import (
	"github.com/dynabill/billing/internal/av"
	"reflect"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/feature/dynamodb/expression"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/dynabill/billing"
	"github.com/dynabill/billing/internal/layout"
)

// writeBack is the update of an existing item from the encoding of the
// record read (prev) to the encoding of the record to write (next), both
// made by the same codec: an attribute whose two encodings are equal is not
// touched, so the stored bytes stay whatever form the item has (a legacy
// timestamp text, an empty string, a NULL, an N "0"); a changed one is SET
// to next's encoding; one prev's encoding has and next's has not is
// REMOVEd. Attributes the codec never produces (unknown ones, data_ on a
// primary item) are in neither encoding, so they are never touched.
//
// keys are never written (DynamoDB rejects a SET of a key attribute; an
// update never changes them). always are SET even when unchanged, so that
// the expression is never empty.
func writeBack(prev, next map[string]av.AttributeValue, keys, always []string) expression.UpdateBuilder {
	var upd expression.UpdateBuilder
	names := make([]string, 0, len(prev)+len(next))
	for name := range prev {
		names = append(names, name)
	}
	for name := range next {
		if _, ok := prev[name]; !ok {
			names = append(names, name)
		}
	}
	// Sorted: the same change makes the same expression.
	slices.Sort(names)
	for _, name := range names {
		if slices.Contains(keys, name) {
			continue
		}
		p, inPrev := prev[name]
		n, inNext := next[name]
		switch {
		case inNext && (!inPrev || !reflect.DeepEqual(p, n) || slices.Contains(always, name)):
			upd = upd.Set(expression.Name(name), exprValue(n))
		case !inNext && inPrev:
			upd = upd.Remove(expression.Name(name))
		}
	}
	return upd
}

// updateAction is the TransactWriteItems action writing back the change
// from prevItem to nextItem (see [writeBack]) to the item of key, on cond.
func updateAction(table *string, key map[string]types.AttributeValue, prevItem, nextItem map[string]av.AttributeValue, cond expression.ConditionBuilder, always ...string) (*types.Update, error) {
	keys := make([]string, 0, len(key))
	for k := range key {
		keys = append(keys, k)
	}
	upd := writeBack(prevItem, nextItem, keys, always)
	expr, err := expression.NewBuilder().WithUpdate(upd).WithCondition(cond).Build()
	if err != nil {
		return nil, err
	}
	return &types.Update{
		TableName: table, Key: key,
		UpdateExpression: expr.Update(), ConditionExpression: expr.Condition(),
		ExpressionAttributeNames: expr.Names(), ExpressionAttributeValues: expr.Values(),
	}, nil
}

// carryData adds to item, the new item of a record moved from prev's key
// to another, the data_ attributes of prev's stored item: they belong to
// whoever put them there, and EncodeItem leaves data_ out of primary
// items, so without this a move would drop them.
func carryData(item map[string]av.AttributeValue, prev *billing.Period) {
	for name, v := range layout.DataAttributes(prev) {
		if strings.HasPrefix(name, layout.DataPrefix) {
			item[name] = v
		}
	}
}
