/**
 * `@spacefix/core`: the Node.js SDK for Spacefix agents. Define tools,
 * resources and prompts, register them on an {@link Agent} and connect it to a
 * Spacefix gateway, which offers them to MCP clients.
 *
 * The wire protocol is docs/agent-protocol.md in the Spacefix repository.
 */
export { Agent, DEFAULT_DRAIN_TIMEOUT_MS, DEFAULT_URL, PROTOCOL_VERSION, SDK_VERSION } from './agent.js';
export { RefusedError } from './registration.js';
export type { AgentOptions, Logger } from './options.js';
export { CannotConfirmError, isCannotConfirm } from './confirm.js';
export { MissingCapabilityError } from './ask.js';
export { ProtocolError, INVALID_PARAMS, INTERNAL_ERROR } from './protocolerror.js';
export { LOG_LEVELS, MAX_LOG_BYTES } from './log.js';
export type { LogLevel } from './log.js';
export type { Answers, ElicitRequest, ElicitResult, Inputs, Root, SampleRequest, SampleResult, SamplingMessage } from './ask.js';
export { defineTool, defineResource, defineResourceTemplate, definePrompt } from './define.js';
export type {
  App,
  Call,
  Caller,
  Completer,
  IdempotencyKeyOf,
  Person,
  Prompt,
  PromptArgument,
  PromptOptions,
  Registrable,
  RetryReason,
  Role,
  Resource,
  ResourceOptions,
  ResourceTemplateOptions,
  Scope,
  TemplateRead,
  Tool,
  ToolAnnotations,
  TaskSupport,
  ToolCall,
  ToolExecution,
  ToolOptions,
} from './define.js';
export { toolAudio, toolError, toolImage, toolText, MAX_CONTENT_PARTS, MAX_RESULT_BYTES } from './result.js';
export type {
  AudioContent,
  Content,
  EmbeddedResource,
  ImageContent,
  PromptMessage,
  PromptResult,
  TextContent,
  ToolResult,
} from './result.js';
export { checkName, MAX_NAME_LENGTH } from './names.js';
export { MAX_PROGRESS_LENGTH, MAX_PROGRESS_PER_SECOND } from './progress.js';
export { toJSONSchema } from './schema.js';
export type { FromJSONSchema, InferArgs, InputSchema, JSONSchema, NoSchema, PromptArgs, StandardSchemaLike } from './schema.js';
