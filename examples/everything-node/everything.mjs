// What the official MCP conformance suite's server scenarios ask of an
// "everything" server, written only against @spacefix/core: the Node twin
// of examples/everything (Go). define(sdk) returns the tools, resources and
// prompts; agent.mjs registers them. Names and texts are those of go-sdk's
// conformance/everything-server.

const IMAGE = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const AUDIO = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=';
export const WATCHED = 'test://watched-resource';

const none = { type: 'object' };
const obj = (properties, ...required) => ({ type: 'object', properties, ...(required.length > 0 && { required }) });
const nameSchema = obj({ name: { type: 'string' } }, 'name');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** Go's %v of a map, as go-sdk's everything-server prints elicitation content. */
const goMap = (m) => (m ? `map[${Object.keys(m).sort().map((k) => `${k}:${Array.isArray(m[k]) ? `[${m[k].join(' ')}]` : m[k]}`).join(' ')}]` : 'map[]');

export function define({ defineTool, defineResource, defineResourceTemplate, definePrompt, MissingCapabilityError, ProtocolError, INTERNAL_ERROR }) {
  const text = (name, description, out) => defineTool({ name, description, inputSchema: none, handler: () => out });
  const elicited = async (call, message, schema) => {
    const r = await call.elicit(message, schema);
    return `Elicitation result: action=${r.action}, content=${goMap(r.content)}`;
  };
  const titled = [
    { const: 'value1', title: 'First Option' },
    { const: 'value2', title: 'Second Option' },
    { const: 'value3', title: 'Third Option' },
  ];
  const confirm = obj({ ok: { type: 'boolean' } }, 'ok');
  const stateOK = async (_args, call) => {
    await call.together({ elicit: { message: 'Please confirm', schema: confirm }, ids: { elicit: 'confirm' } });
    return 'state-ok: requestState received and confirmation accepted';
  };
  const sampleText = (r) => (Array.isArray(r.content) ? r.content : [r.content]).filter((c) => c.type === 'text').map((c) => c.text).join('');

  const tools = [
    text('test_simple_text', 'Tests simple text content response', 'This is a simple text response for testing.'),
    defineTool({ name: 'test_image_content', description: 'Tests image content response', inputSchema: none, handler: () => ({ content: [{ type: 'image', data: IMAGE, mimeType: 'image/png' }] }) }),
    defineTool({ name: 'test_audio_content', description: 'Tests audio content response', inputSchema: none, handler: () => ({ content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }] }) }),
    defineTool({
      name: 'test_embedded_resource', description: 'Tests embedded resource content response', inputSchema: none,
      handler: () => ({ content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource' } }] }),
    }),
    defineTool({
      name: 'test_multiple_content_types', description: 'Tests response with multiple content types (text, image, resource)', inputSchema: none,
      handler: () => ({
        content: [
          { type: 'text', text: 'This is text content' },
          { type: 'image', data: IMAGE, mimeType: 'image/png' },
          { type: 'resource', resource: { uri: 'test://embedded-in-multiple', mimeType: 'text/plain', text: 'This is an embedded resource' } },
        ],
      }),
    }),
    defineTool({
      name: 'test_tool_with_logging', description: 'Tests tool that emits log messages during execution', inputSchema: none,
      handler: async (_args, call) => {
        for (const [i, msg] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
          if (i > 0) await sleep(50);
          call.log('info', msg);
        }
        return 'Tool with logging executed successfully';
      },
    }),
    defineTool({
      name: 'test_tool_with_progress', description: 'Tests tool that reports progress notifications', inputSchema: none,
      handler: async (_args, call) => {
        for (const p of [0, 50, 100]) {
          call.progress(`Completed step ${p} of 100`);
          await sleep(50);
        }
        return 'progress reported';
      },
    }),
    defineTool({
      name: 'test_error_handling', description: 'Tests error response handling', inputSchema: none,
      handler: () => {
        throw new Error('this tool intentionally returns an error for testing');
      },
    }),
    defineTool({
      name: 'test_sampling', description: 'Tests server-initiated sampling (LLM completion request)',
      inputSchema: obj({ prompt: { type: 'string', description: 'The prompt to send to the LLM' } }, 'prompt'),
      handler: async ({ prompt }, call) => {
        const r = await call.sample({ messages: [{ role: 'user', content: { type: 'text', text: prompt } }], maxTokens: 100 });
        return `LLM response: ${sampleText(r)}`;
      },
    }),
    defineTool({
      name: 'test_elicitation', description: 'Tests server-initiated elicitation (user input request)',
      inputSchema: obj({ message: { type: 'string', description: 'The message to show the user' } }, 'message'),
      handler: ({ message }, call) => elicited(call, message, obj({ username: { type: 'string', description: 'Your preferred username' } }, 'username')),
    }),
    defineTool({
      name: 'test_elicitation_sep1034_defaults', description: 'Tests elicitation with default values per SEP-1034', inputSchema: none,
      handler: (_args, call) =>
        elicited(call, 'Test defaults for primitives', obj({
          name: { type: 'string', description: 'User name', default: 'John Doe' },
          age: { type: 'integer', description: 'User age', default: 30 },
          score: { type: 'number', description: 'User score', default: 95.5 },
          status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
          verified: { type: 'boolean', description: 'Verification status', default: true },
        })),
    }),
    defineTool({
      name: 'test_elicitation_sep1330_enums', description: 'Tests elicitation with enum schema improvements per SEP-1330', inputSchema: none,
      handler: (_args, call) =>
        elicited(call, 'Test enum schemas', obj({
          untitledSingle: { type: 'string', enum: ['option1', 'option2', 'option3'] },
          titledSingle: { type: 'string', oneOf: titled },
          legacyEnum: { type: 'string', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
          untitledMulti: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
          titledMulti: { type: 'array', minItems: 1, maxItems: 3, items: { type: 'string', anyOf: titled } },
        })),
    }),
    defineTool({
      name: 'json_schema_2020_12_tool', description: 'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613, SEP-2106)',
      inputSchema: {
        $schema: 'https://json-schema.org/draft/2020-12/schema',
        type: 'object',
        $defs: { address: { $anchor: 'addressDef', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
        properties: {
          name: { type: 'string' },
          address: { $ref: '#/$defs/address' },
          contactMethod: { type: 'string', enum: ['phone', 'email'] },
          phone: { type: 'string' },
          email: { type: 'string' },
        },
        allOf: [{ anyOf: [{ required: ['phone'] }, { required: ['email'] }] }],
        if: { properties: { contactMethod: { const: 'phone' } }, required: ['contactMethod'] },
        then: { required: ['phone'] },
        else: { required: ['email'] },
        additionalProperties: false,
      },
      handler: (args) => `JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`,
    }),
    text('test_reconnection', 'Tests SSE stream disconnection and client reconnection (SEP-1699). Server will close the stream mid-call and send the result after client reconnects.',
      'Reconnection test completed successfully. If you received this, the client properly reconnected after stream closure.'),
    defineTool({
      name: 'test_x_mcp_header', description: 'Tests SEP-2243 Mcp-Param-* server-side validation',
      inputSchema: {
        type: 'object',
        properties: {
          region: { type: 'string', description: 'mirrored into Mcp-Param-Region', 'x-mcp-header': 'Region' },
          level: { type: 'integer', description: 'non-mirrored argument' },
        },
      },
      handler: ({ region }) => `region=${region ?? ''}`,
    }),
    text('test_streaming_elicitation', 'Tests that the response stream carries no independent requests', 'stream observed: result frames only, no top-level requests'),
    defineTool({
      name: 'test_missing_capability', description: "Needs the client's sampling capability (SEP-2575)", inputSchema: none,
      handler: async (_args, call) => {
        if (call.clientCapabilities.includes('sampling')) return 'Client declared the sampling capability; tool executed.';
        // Asking without it fails the call with -32021, as SEP-2575 wants.
        await call.sample({ messages: [{ role: 'user', content: { type: 'text', text: 'ping' } }], maxTokens: 1 });
        return 'unreachable';
      },
    }),
    defineTool({
      name: 'test_logging_tool', description: 'Emits a log message when the client asked for logs', inputSchema: none,
      handler: (_args, call) => {
        call.log('info', 'test_logging_tool executed');
        return 'Log attempted; framework gates on _meta.../logLevel.';
      },
    }),
    // MRTR (SEP-2322): the suite looks for the input requests by the ids
    // go-sdk's everything-server gives them; together names them.
    defineTool({
      name: 'test_input_required_result_elicitation', description: "MRTR (SEP-2322): asks for the user's name", inputSchema: none,
      handler: async (_args, call) => {
        const r = await call.together({ elicit: { message: 'What is your name?', schema: nameSchema }, ids: { elicit: 'user_name' } });
        return `Hello, ${r.elicit.content?.name}!`;
      },
    }),
    defineTool({
      name: 'test_input_required_result_sampling', description: "MRTR (SEP-2322): asks the client's model", inputSchema: none,
      handler: async (_args, call) => {
        const r = await call.together({
          sample: { messages: [{ role: 'user', content: { type: 'text', text: 'What is the capital of France?' } }], maxTokens: 100 },
          ids: { sample: 'capital_question' },
        });
        return `Sampling response: ${sampleText(r.sample)}`;
      },
    }),
    defineTool({
      name: 'test_input_required_result_list_roots', description: "MRTR (SEP-2322): asks for the client's roots", inputSchema: none,
      handler: async (_args, call) => {
        const { roots } = await call.together({ roots: true, ids: { roots: 'client_roots' } });
        return `Client exposed ${roots.length} root(s): ${roots.map((r) => r.uri).join(', ')}`;
      },
    }),
    defineTool({ name: 'test_input_required_result_request_state', description: 'MRTR (SEP-2322): a confirmation carried by requestState', inputSchema: none, handler: stateOK }),
    defineTool({ name: 'test_input_required_result_tampered_state', description: 'MRTR (SEP-2322): a tampered requestState is refused', inputSchema: none, handler: stateOK }),
    defineTool({
      name: 'test_input_required_result_multiple_inputs', description: 'MRTR (SEP-2322): several input requests in one round', inputSchema: none,
      handler: async (_args, call) => {
        const r = await call.together({
          elicit: { message: 'What is your name?', schema: nameSchema },
          sample: { messages: [{ role: 'user', content: { type: 'text', text: 'Generate a short greeting' } }], maxTokens: 50 },
          roots: true,
          ids: { elicit: 'user_name', sample: 'greeting', roots: 'client_roots' },
        });
        return `${sampleText(r.sample)} ${r.elicit.content?.name} — ${r.roots.length} root(s) visible`;
      },
    }),
    defineTool({
      name: 'test_input_required_result_multi_round', description: 'MRTR (SEP-2322): two rounds of questions', inputSchema: none,
      handler: async (_args, call) => {
        const r1 = await call.together({ elicit: { message: 'Step 1: What is your name?', schema: nameSchema }, ids: { elicit: 'step1' } });
        const r2 = await call.together({ elicit: { message: 'Step 2: What is your favorite color?', schema: obj({ color: { type: 'string' } }, 'color') }, ids: { elicit: 'step2' } });
        return `Multi-round complete: ${r1.elicit.content?.name} likes ${r2.elicit.content?.color}`;
      },
    }),
    defineTool({
      name: 'test_input_required_result_capabilities', description: 'MRTR (SEP-2322): asks only for what the client declared', inputSchema: none,
      handler: async (_args, call) => {
        const can = (c) => call.clientCapabilities.includes(c);
        const inputs = { ids: {} };
        if (can('elicitation')) Object.assign(inputs, { elicit: { message: 'What is your name?', schema: nameSchema } }, { ids: { ...inputs.ids, elicit: 'user_name' } });
        if (can('sampling')) {
          inputs.sample = { messages: [{ role: 'user', content: { type: 'text', text: 'Generate a short greeting' } }], maxTokens: 50 };
          inputs.ids = { ...inputs.ids, sample: 'greeting' };
        }
        if (can('roots')) Object.assign(inputs, { roots: true, ids: { ...inputs.ids, roots: 'client_roots' } });
        if (!inputs.elicit && !inputs.sample && !inputs.roots) return 'No declared client capability supports an in-band input request';
        await call.together(inputs);
        return 'Capability-aware input requests fulfilled';
      },
    }),
    ...taskTools(defineTool, ProtocolError, INTERNAL_ERROR),
  ];

  const resources = [
    defineResource({ uri: 'test://static-text', name: 'static-text', description: 'A static text resource for testing', mimeType: 'text/plain', handler: () => 'This is the content of the static text resource.' }),
    defineResource({ uri: 'test://static-binary', name: 'static-binary', description: 'A static binary resource (image) for testing', mimeType: 'image/png', handler: () => Buffer.from(IMAGE, 'base64') }),
    defineResourceTemplate({
      uriTemplate: 'test://template/{id}/data', name: 'template', description: 'A resource template with parameter substitution', mimeType: 'application/json',
      handler: ({ params }) => `{"id": "${params.id}", "templateTest": true, "data": "Data for ID: ${params.id}"}`,
    }),
    defineResource({ uri: WATCHED, name: 'watched-resource', description: 'A resource that auto-updates every 3 seconds', mimeType: 'text/plain', handler: () => 'Watched resource content' }),
  ];

  const prompts = [
    definePrompt({
      name: 'test_simple_prompt', title: 'Simple Test Prompt', description: 'A simple prompt without arguments',
      handler: () => ({ description: 'A simple test prompt', messages: [{ role: 'user', content: 'This is a simple prompt for testing.' }] }),
    }),
    definePrompt({
      name: 'test_prompt_with_arguments', title: 'Prompt With Arguments', description: 'A prompt with required arguments',
      argsSchema: obj({ arg1: { type: 'string', description: 'First test argument' }, arg2: { type: 'string', description: 'Second test argument' } }, 'arg1', 'arg2'),
      handler: ({ arg1, arg2 }) => ({ description: 'A prompt with arguments', messages: [{ role: 'user', content: `Prompt with arguments: arg1='${arg1}', arg2='${arg2}'` }] }),
    }),
    definePrompt({
      name: 'test_prompt_with_embedded_resource', title: 'Prompt With Embedded Resource', description: 'A prompt that includes an embedded resource',
      argsSchema: obj({ resourceUri: { type: 'string', description: 'URI of the resource to embed' } }, 'resourceUri'),
      handler: ({ resourceUri }) => ({
        description: 'A prompt with an embedded resource',
        messages: [
          { role: 'user', content: { type: 'resource', resource: { uri: resourceUri, mimeType: 'text/plain', text: 'Embedded resource content for testing.' } } },
          { role: 'user', content: 'Please process the embedded resource above.' },
        ],
      }),
    }),
    definePrompt({
      name: 'test_prompt_with_image', title: 'Prompt With Image', description: 'A prompt that includes image content',
      handler: () => ({
        description: 'A prompt with an image',
        messages: [
          { role: 'user', content: { type: 'image', data: IMAGE, mimeType: 'image/png' } },
          { role: 'user', content: 'Please analyze the image above.' },
        ],
      }),
    }),
    definePrompt({
      name: 'test_input_required_result_prompt', description: 'MRTR (SEP-2322): asks for context via an in-band elicitation request',
      handler: async (_args, call) => {
        const r = await call.together({ elicit: { message: 'Please provide context for the prompt', schema: obj({ context: { type: 'string' } }, 'context') }, ids: { elicit: 'user_context' } });
        return { description: 'A prompt with elicited context', messages: [{ role: 'user', content: `Context: ${r.elicit.content?.context}` }] };
      },
    }),
  ];
  void MissingCapabilityError;
  return [...tools, ...resources, ...prompts];
}

/** sleepFor waits ms, or rejects with the signal's reason once it aborts. */
const sleepFor = (ms, signal) => new Promise((resolve, reject) => {
  if (signal.aborted) return reject(signal.reason);
  const t = setTimeout(() => { signal.removeEventListener('abort', onAbort); resolve(); }, ms);
  const onAbort = () => { clearTimeout(t); reject(signal.reason); };
  signal.addEventListener('abort', onAbort, { once: true });
});

/**
 * The fixtures of the suite's tasks-* scenarios (the
 * io.modelcontextprotocol/tasks extension, SEP-2663): tools that run as MCP
 * tasks, which the gateway runs and keeps. The twins of registerTasks in
 * examples/everything.
 */
function taskTools(defineTool, ProtocolError, INTERNAL_ERROR) {
  const optional = { taskSupport: 'optional' };
  const required = { taskSupport: 'required' };
  return [
    defineTool({
      name: 'greet', description: 'Greets someone, at once (never a task)',
      inputSchema: obj({ name: { type: 'string', description: 'Who to greet' } }, 'name'),
      handler: ({ name }) => `Hello, ${name}!`,
    }),
    defineTool({
      name: 'slow_compute', description: 'Computes for the given number of seconds, then answers; may run as a task', execution: optional,
      inputSchema: obj({ seconds: { type: 'number', description: 'How long the computation takes, in seconds' }, label: { type: 'string', description: 'A name for the computation' } }, 'seconds'),
      handler: async ({ seconds, label }, call) => {
        call.progress(`Computing ${label ?? ''} for ${seconds}s`);
        await sleepFor(seconds * 1000, call.signal); // cancelled: the task ends cancelled
        return `Computed ${label ?? ''} in ${seconds}s`;
      },
    }),
    defineTool({
      name: 'failing_job', description: 'Fails with a tool error after about a second; runs only as a task', execution: required, inputSchema: none,
      handler: async (_args, call) => {
        await sleepFor(1000, call.signal);
        throw new Error('the job failed: the input data is corrupt');
      },
    }),
    defineTool({
      name: 'protocol_error_job', description: 'Ends with a JSON-RPC error, not a tool error; may run as a task', execution: optional, inputSchema: none,
      handler: () => { throw new ProtocolError(INTERNAL_ERROR, "The job's worker crashed."); },
    }),
    defineTool({
      name: 'confirm_delete', description: 'Asks the user before deleting a file; may run as a task', execution: optional,
      inputSchema: obj({ filename: { type: 'string', description: 'The file to delete' } }, 'filename'),
      handler: async ({ filename }, call) => ((await call.confirm(`Delete ${filename}?`)) ? `Deleted ${filename}.` : `Kept ${filename}.`),
    }),
    defineTool({
      name: 'multi_input', description: 'Asks two questions at once; may run as a task', execution: optional, inputSchema: none,
      handler: async (_args, call) => {
        const r = await call.together({
          elicits: [
            { message: 'What is your name?', schema: nameSchema, id: 'name' },
            { message: 'Do you confirm?', schema: obj({ confirm: { type: 'boolean' } }, 'confirm'), id: 'confirm' },
          ],
        });
        return `Got ${r.elicits[0].content?.name} and confirm=${r.elicits[1].content?.confirm}`;
      },
    }),
    defineTool({
      name: 'test_tool_with_task', description: 'Asks for the user\'s name, then runs as a task; runs only as a task', execution: required, inputSchema: none,
      handler: async (_args, call) => {
        const r = await call.together({ elicit: { message: 'What is your name?', schema: nameSchema }, ids: { elicit: 'user_name' } });
        return `Hello, ${r.elicit.content?.name}! Your task is done.`;
      },
    }),
  ];
}
