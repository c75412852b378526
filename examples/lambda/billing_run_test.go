package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The run template of examples/cloudformation: a state machine that fans a
// day's run out over the due shards with a Distributed Map, each shard a
// loop that invokes this function directly until its answer's next is "".

const (
	runTemplatePath = "../cloudformation/billing-run.json"
	testFunctionArn = "arn:aws:lambda:us-east-1:123456789012:function:billing-collector"
)

// runTemplate is the parsed template and its state machine's definition,
// with the template's ${...} substituted: its parameters by params, the
// pseudo parameters by the values of a deployment in us-east-1.
type runTemplate struct {
	Description string                     `json:"Description"`
	Parameters  map[string]json.RawMessage `json:"Parameters"`
	Resources   map[string]struct {
		Type       string          `json:"Type"`
		DependsOn  any             `json:"DependsOn"`
		Properties json.RawMessage `json:"Properties"`
	} `json:"Resources"`

	machine    string // the state machine's resource
	definition map[string]any
}

var placeholder = regexp.MustCompile(`\$\{([^}]*)\}`)

func loadRunTemplate(t *testing.T, params map[string]string) *runTemplate {
	t.Helper()
	data, err := os.ReadFile(runTemplatePath)
	require.NoError(t, err)
	var tpl runTemplate
	require.NoError(t, json.Unmarshal(data, &tpl), "the template is not JSON")

	var machines []string
	for name, r := range tpl.Resources {
		if r.Type == "AWS::StepFunctions::StateMachine" {
			machines = append(machines, name)
		}
	}
	require.Len(t, machines, 1, "state machines")
	tpl.machine = machines[0]
	var props struct {
		DefinitionString struct {
			Sub string `json:"Fn::Sub"`
		} `json:"DefinitionString"`
	}
	require.NoError(t, json.Unmarshal(tpl.Resources[machines[0]].Properties, &props))
	require.NotEmpty(t, props.DefinitionString.Sub, "DefinitionString is a Fn::Sub of the definition")

	pseudo := map[string]string{"AWS::Partition": "aws", "AWS::Region": "us-east-1", "AWS::AccountId": "123456789012"}
	var unknown []string
	def := placeholder.ReplaceAllStringFunc(props.DefinitionString.Sub, func(m string) string {
		name := m[2 : len(m)-1]
		if _, ok := tpl.Parameters[name]; !ok && pseudo[name] == "" {
			unknown = append(unknown, name)
		}
		if v, ok := params[name]; ok {
			return v
		}
		return pseudo[name]
	})
	require.Empty(t, unknown, "placeholders that are neither parameters nor pseudo parameters")
	require.NoError(t, json.Unmarshal([]byte(def), &tpl.definition), "the definition is not JSON:\n%s", def)
	return &tpl
}

// statesOf returns the states of a definition or an ItemProcessor, by name.
func statesOf(t *testing.T, machine map[string]any) map[string]map[string]any {
	t.Helper()
	raw, ok := machine["States"].(map[string]any)
	require.True(t, ok, "States")
	states := map[string]map[string]any{}
	for name, s := range raw {
		states[name], ok = s.(map[string]any)
		require.True(t, ok, "state %s", name)
	}
	require.Contains(t, states, machine["StartAt"], "StartAt")
	return states
}

// ofType returns the names of the states of a type, sorted.
func ofType(states map[string]map[string]any, typ string) []string {
	var names []string
	for name, s := range states {
		if s["Type"] == typ {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func TestBillingRunTemplate(t *testing.T) {
	tpl := loadRunTemplate(t, map[string]string{"CollectorFunctionArn": testFunctionArn, "DueShards": "32", "MaxConcurrency": "8"})
	assert.Contains(t, tpl.Description, "SQS", "the description names the SQS alternative")
	assert.Contains(t, tpl.Description, "BILLING_LAYOUT=single", "the description names the single table's settings")
	assert.LessOrEqual(t, len(tpl.Description), 1024, "CloudFormation's limit on a template's description, in bytes")
	for _, p := range []string{"CollectorFunctionArn", "DueShards", "MaxConcurrency"} {
		assert.Contains(t, tpl.Parameters, p)
	}

	top := statesOf(t, tpl.definition)
	maps := ofType(top, "Map")
	require.Len(t, maps, 1, "Map states")
	m := top[maps[0]]
	proc, ok := m["ItemProcessor"].(map[string]any)
	require.True(t, ok, "ItemProcessor")
	assert.Equal(t, map[string]any{"Mode": "DISTRIBUTED", "ExecutionType": "STANDARD"}, proc["ProcessorConfig"])
	assert.Equal(t, 8.0, m["MaxConcurrency"], "MaxConcurrency is the parameter, a number")
	assert.Equal(t, "$.shards", m["ItemsPath"], "the map iterates the shard list")
	selector, _ := m["ItemSelector"].(map[string]any)
	assert.Equal(t, "$$.Map.Item.Value", selector["shard.$"], "each item is a shard")
	assert.Equal(t, "", selector["next"], "each shard starts at the top")
	// The shard list [0..K-1] is made by a Pass state from DueShards.
	var lists []string
	for _, name := range ofType(top, "Pass") {
		if p, ok := top[name]["Parameters"].(map[string]any); ok {
			if s, ok := p["shards.$"].(string); ok {
				lists = append(lists, s)
			}
		}
	}
	assert.Equal(t, []string{"States.ArrayRange(0, States.MathAdd(32, -1), 1)"}, lists)

	// Each shard: invoke the function, then loop while next is not "".
	inner := statesOf(t, proc)
	tasks := ofType(inner, "Task")
	require.Len(t, tasks, 1, "Task states in the loop")
	task := inner[tasks[0]]
	assert.Equal(t, "arn:aws:states:::lambda:invoke", task["Resource"])
	params, _ := task["Parameters"].(map[string]any)
	assert.Equal(t, testFunctionArn, params["FunctionName"])
	payload, _ := params["Payload"].(map[string]any)
	assert.ElementsMatch(t, []string{"kind.$", "shards.$", "cursor.$"}, keys(payload), "the payload is a run request")
	retry, _ := task["Retry"].([]any)
	require.NotEmpty(t, retry, "Retry on the invocation")
	var retried []any
	for _, r := range retry {
		r, _ := r.(map[string]any)
		assert.Greater(t, r["BackoffRate"], 1.0, "backoff: %v", r)
		retried = append(retried, r["ErrorEquals"].([]any)...)
	}
	assert.Subset(t, retried, []any{"Lambda.ServiceException", "Lambda.TooManyRequestsException", "States.TaskFailed"})

	choices := ofType(inner, "Choice")
	require.Len(t, choices, 1, "Choice states in the loop")
	rules, _ := inner[choices[0]]["Choices"].([]any)
	require.Len(t, rules, 1)
	assert.Equal(t, map[string]any{"Not": map[string]any{"Variable": "$.next", "StringEquals": ""}, "Next": tasks[0]},
		rules[0], "the loop goes back to the invocation while next is not empty")
	assert.NotEqual(t, tasks[0], inner[choices[0]]["Default"])

	// IAM: the state machine's role invokes the function and starts the
	// map's child executions; a daily schedule starts the state machine.
	var machine struct {
		RoleArn struct {
			GetAtt []string `json:"Fn::GetAtt"`
		} `json:"RoleArn"`
	}
	require.NoError(t, json.Unmarshal(tpl.Resources[tpl.machine].Properties, &machine))
	require.Len(t, machine.RoleArn.GetAtt, 2, "RoleArn is a GetAtt of the role")
	role := machine.RoleArn.GetAtt[0]
	require.Equal(t, "AWS::IAM::Role", tpl.Resources[role].Type)
	allows := tpl.allowed(t, role)
	assert.Contains(t, allows["lambda:InvokeFunction"], `{"Ref":"CollectorFunctionArn"}`)
	assert.Contains(t, allows["states:StartExecution"], `{"Ref":"`+tpl.machine+`"}`, "the distributed map starts child executions of its state machine")

	var schedules []string
	for name, r := range tpl.Resources {
		if r.Type == "AWS::Scheduler::Schedule" {
			schedules = append(schedules, name)
		}
	}
	require.Len(t, schedules, 1, "schedules")
	var schedule struct {
		ScheduleExpression any
		Target             struct {
			Arn     map[string]string
			RoleArn struct {
				GetAtt []string `json:"Fn::GetAtt"`
			}
			Input struct {
				Sub string `json:"Fn::Sub"`
			}
		}
	}
	require.NoError(t, json.Unmarshal(tpl.Resources[schedules[0]].Properties, &schedule))
	assert.Equal(t, map[string]string{"Ref": tpl.machine}, schedule.Target.Arn)
	var input map[string]any
	require.NoError(t, json.Unmarshal([]byte(strings.ReplaceAll(schedule.Target.Input.Sub, "${RunKind}", "scheduled")), &input))
	assert.Equal(t, map[string]any{"kind": "scheduled"}, input, "the schedule's input is the state machine's")
	require.Len(t, schedule.Target.RoleArn.GetAtt, 2)
	assert.Contains(t, tpl.allowed(t, schedule.Target.RoleArn.GetAtt[0])["states:StartExecution"], `{"Ref":"`+tpl.machine+`"}`)
}

// allowed returns, by action, the resources (as compact JSON) that the
// policies of role allow: its own and the AWS::IAM::Policy resources
// attached to it.
func (tpl *runTemplate) allowed(t *testing.T, role string) map[string][]string {
	t.Helper()
	type document struct {
		Statement []struct {
			Effect   string
			Action   any
			Resource any
		}
	}
	var docs []document
	var r struct {
		Policies []struct{ PolicyDocument document }
	}
	require.NoError(t, json.Unmarshal(tpl.Resources[role].Properties, &r))
	for _, p := range r.Policies {
		docs = append(docs, p.PolicyDocument)
	}
	for _, res := range tpl.Resources {
		if res.Type != "AWS::IAM::Policy" {
			continue
		}
		var p struct {
			Roles          []map[string]string
			PolicyDocument document
		}
		require.NoError(t, json.Unmarshal(res.Properties, &p))
		if slices.ContainsFunc(p.Roles, func(r map[string]string) bool { return r["Ref"] == role }) {
			docs = append(docs, p.PolicyDocument)
		}
	}
	list := func(v any) []any {
		if l, ok := v.([]any); ok {
			return l
		}
		return []any{v}
	}
	out := map[string][]string{}
	for _, d := range docs {
		for _, st := range d.Statement {
			if st.Effect != "Allow" {
				continue
			}
			for _, a := range list(st.Action) {
				for _, res := range list(st.Resource) {
					b, err := json.Marshal(res)
					require.NoError(t, err)
					out[a.(string)] = append(out[a.(string)], string(b))
				}
			}
		}
	}
	return out
}

func keys(m map[string]any) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// The state machine, run by a small interpreter of the states it uses
// against this function's handler, collects every due record of every
// shard once: the template and the handler agree on the request and the
// answer.
func TestBillingRunStateMachineRunsTheCollector(t *testing.T) {
	tpl := loadRunTemplate(t, map[string]string{"CollectorFunctionArn": testFunctionArn, "DueShards": "4", "MaxConcurrency": "2"})
	c, pay := shardedCollector(t, map[int]int{0: 1, 1: 2, 2: 3})
	sent := &sentBodies{}
	h := &collectorHandler{collector: c, continuations: sent, logger: slog.New(slog.DiscardHandler)}
	sm := &stateMachine{t: t, invoke: lambda.NewHandler(h.Handle).Invoke}

	// A rerun of one shard, then the day's run over every shard.
	out := sm.run(tpl.definition, map[string]any{"kind": "scheduled", "shards": []any{2.0}}, nil)
	assert.Equal(t, map[int]int{2: 3}, chargedShards(pay))
	runs := out.(map[string]any)["shardRuns"].([]any)
	require.Len(t, runs, 1)
	run := runs[0].(map[string]any)
	assert.Greater(t, run["invocations"], 3.0, "a page an invocation, a record a page")
	delete(run, "invocations")
	assert.Equal(t, map[string]any{"kind": "scheduled", "shard": 2.0, "next": "", "attempted": 3.0, "collected": 3.0, "failed": 0.0}, run)

	out = sm.run(tpl.definition, map[string]any{"kind": "scheduled"}, nil)
	assert.Equal(t, map[int]int{0: 1, 1: 2, 2: 3}, chargedShards(pay), "every record once")
	runs = out.(map[string]any)["shardRuns"].([]any)
	require.Len(t, runs, 4)
	for i, r := range runs {
		r := r.(map[string]any)
		assert.Equal(t, float64(i), r["shard"])
		assert.Equal(t, "", r["next"])
	}
	assert.Equal(t, []float64{1, 2, 0, 0}, []float64{runs[0].(map[string]any)["collected"].(float64), runs[1].(map[string]any)["collected"].(float64),
		runs[2].(map[string]any)["collected"].(float64), runs[3].(map[string]any)["collected"].(float64)})
	assert.Empty(t, sent.bodies, "the state machine continues the runs, not the queue")
}

// The same state machine drives a single-table deployment's collector
// (BILLING_LAYOUT=single, DUE_SHARDS equal to the template's DueShards):
// each shard's child reads its own shard of the due index, and every
// shard is read.
func TestBillingRunStateMachineOnTheSingleTable(t *testing.T) {
	tpl := loadRunTemplate(t, map[string]string{"CollectorFunctionArn": testFunctionArn, "DueShards": "4", "MaxConcurrency": "2"})
	h, f := singleTableCollector(t, map[string]string{"DUE_SHARDS": "4"})
	sm := &stateMachine{t: t, invoke: lambda.NewHandler(h.Handle).Invoke}

	out := sm.run(tpl.definition, map[string]any{"kind": "scheduled", "shards": []any{2.0}}, nil)
	require.Len(t, out.(map[string]any)["shardRuns"], 1)
	assert.Equal(t, []string{"SCHEDULED#2"}, dueKeys(t, f.take(), "billing_due-billing_date-index"), "a rerun of shard 2 reads shard 2")

	out = sm.run(tpl.definition, map[string]any{"kind": "scheduled"}, nil)
	runs := out.(map[string]any)["shardRuns"].([]any)
	require.Len(t, runs, 4)
	for i, r := range runs {
		assert.Equal(t, map[string]any{"kind": "scheduled", "shard": float64(i), "next": "", "invocations": 1.0, "attempted": 0.0, "collected": 0.0, "failed": 0.0}, r)
	}
	assert.Equal(t, []string{"SCHEDULED#0", "SCHEDULED#1", "SCHEDULED#2", "SCHEDULED#3"}, dueKeys(t, f.take(), "billing_due-billing_date-index"))
}

// stateMachine interprets the part of the Amazon States Language the run
// template uses (JSONPath: Pass with Parameters, Choice on IsPresent and
// StringEquals with Not, Map, lambda:invoke Tasks, Succeed), running a
// Map's items one after the other and ignoring Retry.
type stateMachine struct {
	t      *testing.T
	invoke func(context.Context, []byte) ([]byte, error)
	steps  int
}

func (sm *stateMachine) run(machine map[string]any, input, ctxObj any) any {
	t := sm.t
	t.Helper()
	states := statesOf(t, machine)
	name := machine["StartAt"].(string)
	for {
		sm.steps++
		require.Less(t, sm.steps, 10000, "the state machine does not end")
		s := states[name]
		var output any
		switch s["Type"] {
		case "Pass":
			output = sm.template(s["Parameters"], input, ctxObj)
		case "Choice":
			next, _ := s["Default"].(string)
			for _, r := range s["Choices"].([]any) {
				if sm.matches(r.(map[string]any), input) {
					next = r.(map[string]any)["Next"].(string)
					break
				}
			}
			require.NotEmpty(t, next, "state %s: no choice matched and no Default", name)
			name = next
			continue
		case "Map":
			items, err := evalPath(s["ItemsPath"].(string), input, ctxObj)
			require.NoError(t, err, "state %s", name)
			var results []any
			for i, item := range items.([]any) {
				itemCtx := map[string]any{"Map": map[string]any{"Item": map[string]any{"Index": float64(i), "Value": item}}}
				results = append(results, sm.run(s["ItemProcessor"].(map[string]any), sm.template(s["ItemSelector"], input, itemCtx), itemCtx))
			}
			output = setPath(t, input, s["ResultPath"], results)
		case "Task":
			require.True(t, strings.HasSuffix(s["Resource"].(string), ":states:::lambda:invoke"), "state %s: resource %v", name, s["Resource"])
			params := sm.template(s["Parameters"], input, ctxObj).(map[string]any)
			require.Equal(t, testFunctionArn, params["FunctionName"])
			payload, err := json.Marshal(params["Payload"])
			require.NoError(t, err)
			answer, err := sm.invoke(t.Context(), payload)
			require.NoError(t, err, "state %s: invoked with %s", name, payload)
			var result map[string]any
			require.NoError(t, json.Unmarshal(answer, &result), "state %s: answer %s", name, answer)
			selected := sm.template(s["ResultSelector"], map[string]any{"Payload": result, "StatusCode": 200.0}, ctxObj)
			output = setPath(t, input, s["ResultPath"], selected)
		case "Succeed":
			return input
		default:
			require.Fail(t, "unsupported state type", "state %s: %v", name, s["Type"])
		}
		if end, _ := s["End"].(bool); end {
			return output
		}
		name, input = s["Next"].(string), output
	}
}

func (sm *stateMachine) matches(rule map[string]any, input any) bool {
	if not, ok := rule["Not"]; ok {
		return !sm.matches(not.(map[string]any), input)
	}
	v, err := evalPath(rule["Variable"].(string), input, nil)
	if present, ok := rule["IsPresent"]; ok {
		return (err == nil) == present.(bool)
	}
	require.NoError(sm.t, err, "Choice on %v", rule["Variable"])
	if want, ok := rule["StringEquals"]; ok {
		s, isString := v.(string)
		return isString && s == want
	}
	require.Fail(sm.t, "unsupported Choice rule", "%v", rule)
	return false
}

// template evaluates a payload template (Parameters, ItemSelector,
// ResultSelector): a field whose name ends in .$ takes the value of its
// path or intrinsic function.
func (sm *stateMachine) template(tmpl, input, ctxObj any) any {
	m, ok := tmpl.(map[string]any)
	if !ok {
		return tmpl
	}
	out := map[string]any{}
	for k, v := range m {
		if name, ok := strings.CutSuffix(k, ".$"); ok {
			var err error
			out[name], err = evalExpr(v.(string), input, ctxObj)
			require.NoError(sm.t, err, "%s: %v", k, v)
			continue
		}
		out[k] = sm.template(v, input, ctxObj)
	}
	return out
}

func evalExpr(expr string, input, ctxObj any) (any, error) {
	expr = strings.TrimSpace(expr)
	switch {
	case strings.HasPrefix(expr, "States."):
		return evalIntrinsic(expr, input, ctxObj)
	case strings.HasPrefix(expr, "$"):
		return evalPath(expr, input, ctxObj)
	case strings.HasPrefix(expr, "'"):
		return strings.Trim(expr, "'"), nil
	}
	return strconv.ParseFloat(expr, 64)
}

func evalIntrinsic(expr string, input, ctxObj any) (any, error) {
	name, rest, ok := strings.Cut(expr, "(")
	if !ok || !strings.HasSuffix(rest, ")") {
		return nil, fmt.Errorf("intrinsic %q", expr)
	}
	var args []any
	depth, quoted, start := 0, false, 0
	body := rest[:len(rest)-1]
	for i := 0; i <= len(body); i++ {
		if i < len(body) {
			switch c := body[i]; {
			case c == '\'':
				quoted = !quoted
			case quoted:
			case c == '(':
				depth++
			case c == ')':
				depth--
			}
			if quoted || depth > 0 || body[i] != ',' {
				continue
			}
		}
		v, err := evalExpr(body[start:i], input, ctxObj)
		if err != nil {
			return nil, err
		}
		args, start = append(args, v), i+1
	}
	num := func(i int) float64 { f, _ := args[i].(float64); return f }
	switch {
	case name == "States.Array":
		return args, nil
	case name == "States.MathAdd" && len(args) == 2:
		return num(0) + num(1), nil
	case name == "States.ArrayRange" && len(args) == 3 && num(2) > 0:
		var out []any
		for v := num(0); v <= num(1); v += num(2) {
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unsupported intrinsic %q", expr)
}

// evalPath reads a reference path: $ (the input), $.a.b, or $$. (the
// context object).
func evalPath(path string, input, ctxObj any) (any, error) {
	v, rest := input, strings.TrimPrefix(path, "$")
	if r, ok := strings.CutPrefix(path, "$$"); ok {
		v, rest = ctxObj, r
	}
	if rest == "" {
		return v, nil
	}
	if !strings.HasPrefix(rest, ".") {
		return nil, fmt.Errorf("path %q", path)
	}
	for _, f := range strings.Split(rest[1:], ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("path %q: %q of a non-object", path, f)
		}
		if v, ok = m[f]; !ok {
			return nil, fmt.Errorf("path %q: no %q", path, f)
		}
	}
	return v, nil
}

// setPath applies a ResultPath: absent or $ replaces the input, $.field
// sets a field of a copy of it.
func setPath(t *testing.T, input, resultPath, result any) any {
	t.Helper()
	p, _ := resultPath.(string)
	if p == "" || p == "$" {
		return result
	}
	field, ok := strings.CutPrefix(p, "$.")
	require.True(t, ok && !strings.Contains(field, "."), "unsupported ResultPath %q", p)
	out := map[string]any{}
	for k, v := range input.(map[string]any) {
		out[k] = v
	}
	out[field] = result
	return out
}
