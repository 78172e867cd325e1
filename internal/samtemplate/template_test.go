package samtemplate_test

import (
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/stretchr/testify/require"

	"github.com/projhost/projhost/internal/dynamotables"
	"github.com/projhost/projhost/lambda"
	"github.com/projhost/projhost/projection"
)

const templatePath = "../../template.yaml"

// subnets stands in for the Subnets parameter, whose default ("") goformation cannot put into
// the service's typed Subnets list.
var subnets = []any{"subnet-0123456789abcdef0"}

// typed is template.yaml parsed by goformation into its typed resources, with goformation's
// intrinsic processing: a Ref to a parameter becomes the parameter's default (or the override),
// Fn::Sub is resolved from them, a Ref to a resource and Fn::GetAtt become nothing.
func typed(t *testing.T, overrides map[string]any) *cloudformation.Template {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	o := map[string]any{"Subnets": subnets}
	for k, v := range overrides {
		o[k] = v
	}
	tpl, err := goformation.ParseYAMLWithOptions(b, &intrinsics.ProcessorOptions{ParameterOverrides: o})
	require.NoError(t, err)
	return tpl
}

// obj is a JSON object of the raw template.
type obj = map[string]any

// raw is template.yaml as goformation reads it (short forms such as !GetAtt turned into their
// long forms) without intrinsic processing: {"Ref": ...}, {"Fn::GetAtt": ...}, {"Fn::If": ...}
// stay as they are. The checks that goformation's types cannot make use it: its SAM Kinesis
// event type (serverless.Function_KinesisEvent) has no ParallelizationFactor,
// MaximumRetryAttempts, MaximumRecordAgeInSeconds, BisectBatchOnFunctionError or
// DestinationConfig (the event does not decode into it), and its processing turns Fn::GetAtt,
// Refs to resources and an unevaluated Fn::If into nothing (policy resources, the on-failure
// destination, conditional policy statements).
func raw(t *testing.T) obj {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	j, err := intrinsics.ProcessYAML(b, &intrinsics.ProcessorOptions{NoProcess: true})
	require.NoError(t, err)
	var m obj
	require.NoError(t, json.Unmarshal(j, &m))
	return m
}

func resource(t *testing.T, tpl obj, name string) obj {
	t.Helper()
	r, ok := tpl["Resources"].(obj)[name].(obj)
	require.True(t, ok, "resource %s", name)
	return r
}

func props(t *testing.T, tpl obj, name string) obj {
	t.Helper()
	p, ok := resource(t, tpl, name)["Properties"].(obj)
	require.True(t, ok, "resource %s has Properties", name)
	return p
}

// getAttTarget returns the resource of {"Fn::GetAtt": "R.Attr"} or {"Fn::GetAtt": ["R", "Attr"]}.
func getAttTarget(v any) (resource, attr string, ok bool) {
	m, _ := v.(obj)
	switch g := m["Fn::GetAtt"].(type) {
	case string:
		resource, attr, ok = strings.Cut(g, ".")
		return resource, attr, ok
	case []any:
		if len(g) == 2 {
			r, ok1 := g[0].(string)
			a, ok2 := g[1].(string)
			return r, a, ok1 && ok2
		}
	}
	return "", "", false
}

// param resolves a value that is a literal number or a Ref to a Number parameter: the value (the
// parameter's default) and the parameter's MinValue and MaxValue (the value itself for a literal).
func param(t *testing.T, tpl obj, v any) (val, minV, maxV float64) {
	t.Helper()
	if f, ok := v.(float64); ok {
		return f, f, f
	}
	ref, ok := v.(obj)["Ref"].(string)
	require.True(t, ok, "%v is a number or a Ref", v)
	p, ok := tpl["Parameters"].(obj)[ref].(obj)
	require.True(t, ok, "parameter %s", ref)
	require.Equal(t, "Number", p["Type"], "parameter %s", ref)
	def, ok1 := p["Default"].(float64)
	minV, ok2 := p["MinValue"].(float64)
	maxV, ok3 := p["MaxValue"].(float64)
	require.True(t, ok1 && ok2 && ok3, "parameter %s has a Default, a MinValue and a MaxValue: %v", ref, p)
	return def, minV, maxV
}

// TestEventSourceMapping: the function's Kinesis event is what package lambda needs
// (ReportBatchItemFailures, one invocation per shard) with finite retries and record age, and its
// on-failure destination is the template's queue. Checked on the raw template (see raw).
func TestEventSourceMapping(t *testing.T) {
	tpl := raw(t)
	events := props(t, tpl, "ProjectionFunction")["Events"].(obj)
	require.Len(t, events, 1)
	ev := events["Stream"].(obj)
	require.Equal(t, "Kinesis", ev["Type"])
	p := ev["Properties"].(obj)

	require.Contains(t, p["FunctionResponseTypes"], "ReportBatchItemFailures")
	require.Equal(t, 1.0, p["ParallelizationFactor"], "one invocation per shard at a time: package lambda's fencing assumes it")
	require.Equal(t, true, p["BisectBatchOnFunctionError"])

	// A numeric setting is a literal or a Ref to a parameter whose default and whole range
	// (MinValue..MaxValue) lie in AWS's bounds for it: the two whose AWS default is -1
	// (infinite) cannot be set to it.
	for _, c := range []struct {
		key        string
		minV, maxV float64
	}{
		{"BatchSize", 1, 10000},
		{"MaximumBatchingWindowInSeconds", 0, 300},
		{"MaximumRetryAttempts", 0, 10000},
		{"MaximumRecordAgeInSeconds", 60, 604800},
	} {
		t.Run(c.key, func(t *testing.T) {
			v, ok := p[c.key]
			require.True(t, ok, "%s is set explicitly", c.key)
			def, minV, maxV := param(t, tpl, v)
			require.NotEqual(t, -1.0, def)
			require.GreaterOrEqual(t, minV, c.minV)
			require.LessOrEqual(t, maxV, c.maxV)
			require.True(t, minV <= def && def <= maxV, "default %v in %v..%v", def, minV, maxV)
		})
	}

	start, ok := p["StartingPosition"].(obj)["Ref"].(string)
	require.True(t, ok)
	sp := tpl["Parameters"].(obj)[start].(obj)
	require.ElementsMatch(t, []any{"TRIM_HORIZON", "LATEST"}, sp["AllowedValues"])

	stream, attr, ok := getAttTarget(p["Stream"])
	require.True(t, ok, "Stream is the template's stream's ARN: %v", p["Stream"])
	require.Equal(t, "Arn", attr)
	require.Equal(t, "AWS::Kinesis::Stream", resource(t, tpl, stream)["Type"])

	dest := p["DestinationConfig"].(obj)["OnFailure"].(obj)["Destination"]
	q, attr, ok := getAttTarget(dest)
	require.True(t, ok, "the on-failure destination is a resource's ARN: %v", dest)
	require.Equal(t, "Arn", attr)
	require.Equal(t, "AWS::SQS::Queue", resource(t, tpl, q)["Type"])
}

// TestFunction: the function is the makefile-built bootstrap on provided.al2023/arm64, with its
// own role (so that SAM adds no managed policies), under the lambda Mode.
func TestFunction(t *testing.T) {
	f, err := typed(t, nil).GetServerlessFunctionWithName("ProjectionFunction")
	require.NoError(t, err)
	require.Equal(t, "provided.al2023", aws.ToString(f.Runtime))
	require.Equal(t, "bootstrap", aws.ToString(f.Handler))
	require.Equal(t, []string{"arm64"}, f.Architectures)
	require.NotNil(t, f.CodeUri)
	require.Equal(t, ".", aws.ToString(f.CodeUri.String))
	require.Equal(t, "makefile", f.AWSCloudFormationMetadata["BuildMethod"])
	require.NotNil(t, f.MemorySize)
	require.NotNil(t, f.Timeout)
	require.Equal(t, "IsLambda", f.AWSCloudFormationCondition)
	require.Nil(t, f.Policies, "policies are on the role")

	tpl := raw(t)
	r, attr, ok := getAttTarget(props(t, tpl, "ProjectionFunction")["Role"])
	require.True(t, ok)
	require.Equal(t, "Arn", attr)
	require.Equal(t, "AWS::IAM::Role", resource(t, tpl, r)["Type"])

	for _, c := range []struct{ resource, condition string }{
		{"ProjectionFunction", "IsLambda"}, {"FunctionRole", "IsLambda"},
		{"Service", "IsContainer"}, {"TaskDefinition", "IsContainer"}, {"TaskRole", "IsContainer"},
	} {
		require.Equal(t, c.condition, resource(t, tpl, c.resource)["Condition"], c.resource)
	}
	conds := tpl["Conditions"].(obj)
	require.Equal(t, obj{"Fn::Equals": []any{obj{"Ref": "Mode"}, "lambda"}}, conds["IsLambda"])
	require.Equal(t, obj{"Fn::Equals": []any{obj{"Ref": "Mode"}, "container"}}, conds["IsContainer"])
}

// TestFunctionTimeout: with the parameters' defaults, the function's timeout leaves time for
// one record the handler keeps failing on (lambda.Config.MinTimeout) three times over, so an
// invocation handles its records in chunks of some size (lambda's handleChunks); and the
// environment carries the attempts and the deadline the minimum is computed from.
func TestFunctionTimeout(t *testing.T) {
	params := raw(t)["Parameters"].(obj)
	def := func(name string) string { return fmt.Sprint(params[name].(obj)["Default"]) }
	attempts, err := strconv.Atoi(def("MaxAttempts"))
	require.NoError(t, err)
	deadline, err := time.ParseDuration(def("BatchDeadline"))
	require.NoError(t, err)
	timeout, err := strconv.Atoi(def("FunctionTimeout"))
	require.NoError(t, err)
	min := lambda.Config{Core: projection.Config{Policy: projection.Policy{MaxAttempts: attempts}}, BatchDeadline: deadline}.MinTimeout()
	require.LessOrEqual(t, 3*min, time.Duration(timeout)*time.Second, "minimum %v", min)
	require.Equal(t, float64(900), params["FunctionTimeout"].(obj)["MaxValue"], "Lambda's maximum timeout")

	fn := props(t, raw(t), "ProjectionFunction")
	require.Equal(t, obj{"Ref": "FunctionTimeout"}, fn["Timeout"])
	vars := fn["Environment"].(obj)["Variables"].(obj)
	require.Equal(t, obj{"Ref": "MaxAttempts"}, vars[lambda.EnvMaxAttempts])
	require.Equal(t, obj{"Ref": "BatchDeadline"}, vars[lambda.EnvBatchDeadline])
}

// TestFunctionEnvironment: the function sets only variables cmd/bootstrap reads, and every one
// it requires.
func TestFunctionEnvironment(t *testing.T) {
	f, err := typed(t, nil).GetServerlessFunctionWithName("ProjectionFunction")
	require.NoError(t, err)
	require.NotNil(t, f.Environment)
	var names []string
	for k := range f.Environment.Variables {
		names = append(names, k)
	}
	for _, n := range names {
		require.Contains(t, lambda.EnvVars(), n, "cmd/bootstrap does not read %s", n)
	}
	for _, n := range lambda.EnvRequired() {
		require.Contains(t, names, n, "cmd/bootstrap requires %s", n)
	}
	// The values, with the parameters' defaults (a Ref to the bucket resolves to nothing here).
	require.Equal(t, "flights", f.Environment.Variables[lambda.EnvProjection])
	require.Equal(t, "projhost-", f.Environment.Variables[lambda.EnvTablePrefix])
	require.Equal(t, "dead-letter", f.Environment.Variables[lambda.EnvOnError])
	require.Equal(t, obj{"Fn::Sub": "s3://${ModuleBucket}"},
		props(t, raw(t), "ProjectionFunction")["Environment"].(obj)["Variables"].(obj)[lambda.EnvModuleStore])
}

// TestTables: the template's DynamoDB tables are internal/dynamotables' Definitions for the
// TablePrefix parameter: names, key schemas, attribute definitions, billing.
func TestTables(t *testing.T) {
	for _, prefix := range []string{dynamotables.DefaultPrefix, "prod.flights_", ""} {
		t.Run("prefix="+prefix, func(t *testing.T) {
			tpl := typed(t, map[string]any{"TablePrefix": prefix})
			tables := tpl.GetAllDynamoDBTableResources()
			byName := map[string]*dynamodb.Table{}
			for _, tb := range tables {
				byName[aws.ToString(tb.TableName)] = tb
			}
			defs, err := dynamotables.Definitions(prefix)
			require.NoError(t, err)
			require.Len(t, tables, len(defs), "the template's tables are the code's")
			for _, d := range defs {
				tb, ok := byName[aws.ToString(d.TableName)]
				require.True(t, ok, "table %s (tables: %v)", aws.ToString(d.TableName), byName)
				require.Equal(t, string(d.BillingMode), aws.ToString(tb.BillingMode))
				var wantKeys, gotKeys, wantAttrs, gotAttrs [][2]string
				for _, k := range d.KeySchema {
					wantKeys = append(wantKeys, [2]string{aws.ToString(k.AttributeName), string(k.KeyType)})
				}
				for _, k := range tb.KeySchema {
					gotKeys = append(gotKeys, [2]string{k.AttributeName, k.KeyType})
				}
				for _, a := range d.AttributeDefinitions {
					wantAttrs = append(wantAttrs, [2]string{aws.ToString(a.AttributeName), string(a.AttributeType)})
				}
				for _, a := range tb.AttributeDefinitions {
					gotAttrs = append(gotAttrs, [2]string{a.AttributeName, a.AttributeType})
				}
				require.Equal(t, wantKeys, gotKeys, "key schema of %s", *d.TableName)
				require.Equal(t, wantAttrs, gotAttrs, "attribute definitions of %s", *d.TableName)
				require.Empty(t, tb.GlobalSecondaryIndexes)
				require.Empty(t, tb.LocalSecondaryIndexes)
			}
		})
	}
}

// The IAM actions the template may grant: what the code calls (store/dynamo, registry/s3blobs,
// source/kinesis, `projhost run`'s table check), what the event source mapping needs (the
// Kinesis reads and its on-failure SendMessage), logs, and the ECR image pull.
var allowedActions = []string{
	"dynamodb:GetItem", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:Query",
	"dynamodb:DescribeTable",
	"kinesis:DescribeStream", "kinesis:DescribeStreamSummary", "kinesis:GetRecords", "kinesis:GetShardIterator", "kinesis:ListShards",
	"s3:GetObject", "s3:ListBucket",
	"sqs:SendMessage",
	"logs:CreateLogStream", "logs:PutLogEvents",
	"ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage",
	"sts:AssumeRole",
}

// resourceless are the actions without resource-level permissions: their Resource is "*".
var resourceless = []string{"ecr:GetAuthorizationToken"}

// statements returns a policy document's statements, both branches of a conditional one
// (Fn::If) included.
func statements(t *testing.T, doc any) []obj {
	t.Helper()
	var out []obj
	var add func(v any)
	add = func(v any) {
		m, ok := v.(obj)
		require.True(t, ok, "statement %v", v)
		if f, ok := m["Fn::If"].([]any); ok {
			require.Len(t, f, 3)
			for _, b := range f[1:] {
				if b.(obj)["Ref"] != "AWS::NoValue" {
					add(b)
				}
			}
			return
		}
		out = append(out, m)
	}
	switch s := doc.(obj)["Statement"].(type) {
	case []any:
		for _, v := range s {
			add(v)
		}
	default:
		add(s)
	}
	return out
}

func strs(v any) []string {
	switch a := v.(type) {
	case string:
		return []string{a}
	case []any:
		var out []string
		for _, x := range a {
			s, _ := x.(string)
			out = append(out, s)
		}
		return out
	}
	return nil
}

// TestPolicies: every IAM policy statement of the template (the roles' inline policies, their
// trust policies, any policy resource) names its actions explicitly, none with a wildcard, only
// actions the code needs; resources are "*" only for actions that have no other; no managed
// policies.
func TestPolicies(t *testing.T) {
	tpl := raw(t)
	var docs []string
	for name, r := range tpl["Resources"].(obj) {
		r := r.(obj)
		p, _ := r["Properties"].(obj)
		var policyDocs []any
		switch r["Type"] {
		case "AWS::IAM::Role":
			require.NotContains(t, p, "ManagedPolicyArns", name)
			require.NotContains(t, p, "PermissionsBoundary", name)
			policyDocs = append(policyDocs, p["AssumeRolePolicyDocument"])
			for _, pol := range p["Policies"].([]any) {
				policyDocs = append(policyDocs, pol.(obj)["PolicyDocument"])
			}
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy":
			policyDocs = append(policyDocs, p["PolicyDocument"])
		case "AWS::Serverless::Function":
			require.NotContains(t, p, "Policies", "%s: write policies out on its role", name)
			require.Contains(t, p, "Role", "%s: without a Role SAM generates one with managed policies", name)
		}
		for i, d := range policyDocs {
			for _, s := range statements(t, d) {
				docs = append(docs, name)
				require.NotContains(t, s, "NotAction", name)
				require.NotContains(t, s, "NotResource", name)
				require.Equal(t, "Allow", s["Effect"], name)
				actions := strs(s["Action"])
				require.NotEmpty(t, actions, "%s policy %d: %v", name, i, s)
				for _, a := range actions {
					require.NotContains(t, a, "*", "%s: wildcard action", name)
					require.Contains(t, allowedActions, a, "%s: an action the code does not call", name)
				}
				if a := strs(s["Action"]); i == 0 && r["Type"] == "AWS::IAM::Role" {
					require.Equal(t, []string{"sts:AssumeRole"}, a, "%s trust policy", name)
					continue
				}
				require.Contains(t, s, "Resource", name)
				if slices.Contains(strs(s["Resource"]), "*") {
					for _, a := range actions {
						require.Contains(t, resourceless, a, "%s: %s on every resource", name, a)
					}
				}
			}
		}
	}
	require.NotEmpty(t, docs)

	// Lambda mode holds no leases: the function's role has no access to the leases table; the
	// workers' role writes leases.
	fr, _ := json.Marshal(props(t, tpl, "FunctionRole"))
	require.NotContains(t, string(fr), "LeasesTable")
	var leaseActions []string
	for _, pol := range props(t, tpl, "TaskRole")["Policies"].([]any) {
		for _, s := range statements(t, pol.(obj)["PolicyDocument"]) {
			if r, _, _ := getAttTarget(s["Resource"]); r == "LeasesTable" {
				leaseActions = append(leaseActions, strs(s["Action"])...)
			}
		}
	}
	require.Contains(t, leaseActions, "dynamodb:PutItem")
}

// pseudo are CloudFormation's pseudo parameters.
var pseudo = []string{"AWS::AccountId", "AWS::NoValue", "AWS::Partition", "AWS::Region", "AWS::StackId", "AWS::StackName", "AWS::URLSuffix"}

// TestReferences: every Ref, Fn::GetAtt, Fn::Sub variable and condition name of the template
// names something the template defines.
func TestReferences(t *testing.T) {
	tpl := raw(t)
	params, res, conds := tpl["Parameters"].(obj), tpl["Resources"].(obj), tpl["Conditions"].(obj)
	known := func(name string) bool {
		_, p := params[name]
		_, r := res[name]
		return p || r || slices.Contains(pseudo, name)
	}
	subVar := regexp.MustCompile(`\$\{([^}!]+)\}`)
	n := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case obj:
			for k, sub := range x {
				switch k {
				case "Ref":
					n++
					require.True(t, known(sub.(string)), "%s: Ref %v", path, sub)
				case "Fn::GetAtt":
					n++
					r, _, ok := getAttTarget(x)
					require.True(t, ok, "%s: %v", path, x)
					_, ok = res[r]
					require.True(t, ok, "%s: GetAtt %v: no such resource", path, sub)
				case "Fn::Sub":
					s, ok := sub.(string)
					require.True(t, ok, "%s: Fn::Sub with a string", path)
					for _, m := range subVar.FindAllStringSubmatch(s, -1) {
						n++
						name, _, _ := strings.Cut(m[1], ".")
						require.True(t, known(name), "%s: ${%s}", path, m[1])
					}
				case "Fn::If":
					require.Contains(t, conds, sub.([]any)[0], "%s: Fn::If", path)
				case "Condition":
					if s, ok := sub.(string); ok {
						require.Contains(t, conds, s, "%s: Condition", path)
					}
				}
				walk(path+"/"+k, sub)
			}
		case []any:
			for _, sub := range x {
				walk(path, sub)
			}
		}
	}
	walk("", obj{"Resources": res, "Outputs": tpl["Outputs"], "Conditions": conds})
	require.Greater(t, n, 50)
}

// TestContainerMode: the Fargate task runs `projhost run` on the template's stream, tables,
// bucket and projection.
func TestContainerMode(t *testing.T) {
	tpl := raw(t)
	defs := props(t, tpl, "TaskDefinition")["ContainerDefinitions"].([]any)
	require.Len(t, defs, 1)
	cmd := defs[0].(obj)["Command"].([]any)
	require.Equal(t, "run", cmd[0])
	flags := map[string]any{}
	for i := 1; i < len(cmd); i += 2 {
		f, ok := cmd[i].(string)
		require.True(t, ok && strings.HasPrefix(f, "--"), "flag then value: %v", cmd)
		flags[f] = cmd[i+1]
	}
	for _, c := range []struct {
		flag string
		want any
	}{
		{"--source", "kinesis"},
		{"--stream", obj{"Ref": "Stream"}},
		{"--store", "dynamodb"},
		{"--table-prefix", obj{"Ref": "TablePrefix"}},
		{"--module-store", obj{"Fn::Sub": "s3://${ModuleBucket}"}},
		{"--name", obj{"Ref": "ProjectionName"}},
		{"--on-error", obj{"Ref": "OnError"}},
		{"--max-attempts", obj{"Ref": "MaxAttempts"}},
		{"--batch-deadline", obj{"Ref": "BatchDeadline"}},
	} {
		require.Equal(t, c.want, flags[c.flag], c.flag)
	}
	require.Equal(t, obj{"Ref": "ContainerImage"}, defs[0].(obj)["Image"])
	tr, attr, ok := getAttTarget(props(t, tpl, "TaskDefinition")["TaskRoleArn"])
	require.True(t, ok && attr == "Arn" && tr == "TaskRole")
	require.Equal(t, "FARGATE", props(t, tpl, "Service")["LaunchType"])
}

// TestOnError: the OnError parameter offers the core's three policies, dead-letter by default
// (the event source mapping's own on-failure record holds no data).
func TestOnError(t *testing.T) {
	p := raw(t)["Parameters"].(obj)["OnError"].(obj)
	require.ElementsMatch(t, []any{"retry", "dead-letter", "stop"}, p["AllowedValues"])
	require.Equal(t, "dead-letter", p["Default"])
}

// TestOutputs: what `projhost deploy` and the operator need from the stack.
func TestOutputs(t *testing.T) {
	out := raw(t)["Outputs"].(obj)
	for _, c := range []struct {
		name string
		want any
	}{
		{"StreamName", obj{"Ref": "Stream"}},
		{"StreamArn", obj{"Fn::GetAtt": "Stream.Arn"}},
		{"ModuleBucketName", obj{"Ref": "ModuleBucket"}},
		{"ModuleStore", obj{"Fn::Sub": "s3://${ModuleBucket}"}},
		{"TablePrefix", obj{"Ref": "TablePrefix"}},
		{"OnFailureQueueUrl", obj{"Ref": "OnFailureQueue"}},
		{"FunctionName", obj{"Ref": "ProjectionFunction"}},
	} {
		o, ok := out[c.name].(obj)
		require.True(t, ok, c.name)
		require.Equal(t, c.want, o["Value"], c.name)
	}
}
