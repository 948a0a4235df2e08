"""Names stored in Temporal history or typed by people: change none of them lightly."""

from __future__ import annotations

from datetime import timedelta

from temporalio.common import SearchAttributeKey

TASK_QUEUE = "chamvi"
DEFAULT_API_PORT = 3000
"""The port of the HTTP API (`chamvi api`, `chamvi dev`)."""

AGENT_RUN_WORKFLOW = "AgentRun"
AGENT_CHECK_WORKFLOW = "AgentCheck"
"""Asks a worker whether its app serves an agent, before a dispatch starts a run of it."""
AGENT_CHECK_ID_PREFIX = "agent-check-"
CONCURRENCY_LOCK_WORKFLOW = "ChamviConcurrencyLock"
AGENT_REGISTRY_WORKFLOW = "AgentRegistry"
"""A short workflow per put, remove or read of runtime agents from a process without the App (the
CLI, ``ChamviClient``): a worker checks the definition against its App and writes the revision."""
AGENT_REGISTRY_ID_PREFIX = "agent-registry-"

ACTIVITY_DESCRIBE_AGENT = "chamvi.describe_agent"
ACTIVITY_CALL_MODEL = "chamvi.call_model"
ACTIVITY_CALL_TOOL = "chamvi.call_tool"
ACTIVITY_EXTRACT = "chamvi.extract"
ACTIVITY_WAIT_FOR_RUN = "chamvi.wait_for_run"
ACTIVITY_ENQUEUE_LOCK = "chamvi.enqueue_concurrency_lock"
ACTIVITY_RUN_IS_OPEN = "chamvi.run_is_open"
ACTIVITY_LIST_MCP_TOOLS = "chamvi.list_mcp_tools"
ACTIVITY_AGENT_REGISTRY = "chamvi.agent_registry"

SIGNAL_APPROVE = "approve"
SIGNAL_LOCK_GRANTED = "concurrency_granted"
SIGNAL_LOCK_ACQUIRE = "acquire"
SIGNAL_LOCK_RELEASE = "release"
UPDATE_ANSWER_APPROVAL = "answer_approval"
SIGNAL_EFFECT_RECORDED = "effect_recorded"
"""A tool call records an effect in its run as soon as it happened (an emit's key once ``out``
returned), so a worker killed before the call ends leaves the key behind and the retry skips it."""
QUERY_RUN = "run"
QUERY_TRANSCRIPT = "transcript"
QUERY_EFFECT = "effect"
QUERY_TRIGGER = "trigger"
MCP_META_EFFECT_KEY = "chamvi/effect-key"
"""The ``_meta`` key of an MCP effect tool's call that carries its effect key, so a server can use it
as an idempotency key (the call a killed worker lost is made again with the same key)."""
QUERY_MCP_TOOLS = "mcp_tools"
QUERY_EXTRACTION = "extraction"
"""The MCP tools a run listed at its start, read by the model activity of a worker that has not
seen the run before (tool schemas enter the history once per run, not once per step)."""

KNOWLEDGE_COLLECTION_WORKFLOW = "KnowledgeCollection"
KNOWLEDGE_SYNC_REQUEST_WORKFLOW = "KnowledgeSyncRequest"
KNOWLEDGE_SEARCH_WORKFLOW = "KnowledgeSearch"
KNOWLEDGE_PASS_WORKFLOW = "KnowledgePass"
"""One indexing pass, a child of its collection's workflow (``knowledge-pass:<name>:<chain>:<n>``)."""
ACTIVITY_KNOWLEDGE_PASS = "chamvi.knowledge_pass"
ACTIVITY_KNOWLEDGE_REQUEST_SYNC = "chamvi.knowledge_request_sync"
ACTIVITY_KNOWLEDGE_SEARCH = "chamvi.knowledge_search"
SIGNAL_KNOWLEDGE_SYNC = "sync"
QUERY_KNOWLEDGE_STATE = "state"
UPDATE_KNOWLEDGE_SEARCH = "search"
MEMO_KNOWLEDGE_QUEUED = "queued"
"""A collection workflow's memo: True while a pass is owed and has not begun, so a sync request
(every PUT over REST makes one) reads it instead of adding a signal to the history."""
MEMO_KNOWLEDGE_PASS_COLLECTION = "collection"
"""A pass workflow's memo: the collection it reads, from its start."""
MEMO_KNOWLEDGE_PASS_STATS = "stats"
"""A pass workflow's memo: its counts (``PassStats``), once it has finished."""
MEMO_KNOWLEDGE_PASS_GENERATION = "generation"
"""A pass workflow's memo: the generation searches read after it."""
PATCH_KNOWLEDGE_QUEUED_MEMO = "knowledge-queued-memo"
PATCH_KNOWLEDGE_RESYNC_TIMER = "knowledge-resync-timer"
"""A collection's resync is a timer of its workflow, ``resync`` after the last successful pass."""
PATCH_KNOWLEDGE_START_SKIPS_BACKOFF = "knowledge-start-skips-backoff"
"""A worker's start request ends a backoff under way: its own first attempt runs at once."""
PATCH_KNOWLEDGE_PASS_WORKFLOW = "knowledge-pass-workflow"
"""Each pass is a ``KnowledgePass`` child workflow, not an activity of the collection's workflow."""
PATCH_KNOWLEDGE_PASS_WORKFLOW_MOVE = "knowledge-pass-workflow-move"
"""A run that made its passes as activities continues as new before its next one, so it moves over;
the id ends in ``-<n>``, the passes that run made before (``knowledge-pass-workflow-move-3``)."""
KNOWLEDGE_MAX_TOP_K = 20
"""The most passages one `knowledge_search` returns."""
KNOWLEDGE_MAX_CHARS = 20_000
"""The most characters of passages one `knowledge_search` returns."""
AGENT_KNOWLEDGE_PREFIX = "agent-"
"""An agent's own knowledge folder is the collection ``agent-<name>`` (``chamvi.knowledge.agent_folders``)."""
KNOWLEDGE_ID_PREFIX = "knowledge:"
KNOWLEDGE_PASS_ID_PREFIX = "knowledge-pass:"
KNOWLEDGE_SCHEDULE_PREFIX = "knowledge-resync:"

SCHEDULED_RUN_WORKFLOW = "ChamviScheduledRun"
"""Started by an agent's Temporal Schedule at each fire: dispatches one ordinary run, keyed by the
schedule and the fire time, and (unless the overlap policy is ``allow_all``) lives as long as that run
so the Schedule's overlap policy applies to runs."""
ACTIVITY_DISPATCH_SCHEDULED = "chamvi.dispatch_scheduled"
SCHEDULE_ID_PREFIX = "chamvi-schedule:"
"""The Temporal Schedule of an agent schedule ``daily-digest`` is ``chamvi-schedule:daily-digest``."""
SCHEDULED_RUN_ID_PREFIX = "scheduled-run:"
"""The fire workflow's id before the fire time Temporal appends (``scheduled-run:<id>-<time>``)."""
SCHEDULE_TRIGGER = "schedule"
"""The ``trigger`` of a scheduled run, and the ``kind`` of its invoker (whose id is the schedule id)."""
SA_SCHEDULED_START_TIME = SearchAttributeKey.for_datetime("TemporalScheduledStartTime")
"""Temporal's own attribute on a workflow a Schedule started: the fire's nominal time."""

SA_AGENT = SearchAttributeKey.for_keyword("ChamviAgent")
SA_STATUS = SearchAttributeKey.for_keyword("ChamviStatus")
SA_CHANNEL = SearchAttributeKey.for_keyword("ChamviChannel")
SA_TAINTED = SearchAttributeKey.for_bool("ChamviTainted")
SA_CONVERSATION = SearchAttributeKey.for_keyword("ChamviConversation")
"""The conversation id, on a ``Conversation`` workflow and on each of its turn runs."""
SEARCH_ATTRIBUTES = (SA_AGENT, SA_STATUS, SA_CHANNEL, SA_TAINTED, SA_CONVERSATION)

RUN_ID_PREFIX = "run-"
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*(:[A-Za-z0-9._-]+)*$"
"""A run id the API takes: what chamvi's run ids are (``run-<agent>-<32 hex>``, a schedule's
``scheduled-run:<id>-<time>``), letters, digits, ``.``, ``_``, ``-`` and single ``:`` between them."""
RUN_ID_MAX_LENGTH = 128
"""With ``RUN_ID_PATTERN``, a run id's artifact folder (``:`` quoted as ``%3A``) stays within the 255
bytes a folder name may have: 128 characters hold at most 63 ``:``, 254 bytes quoted."""
CHANNEL_TRIGGER = "channel"
"""The ``trigger`` of a run a channel started (its ``channel`` names which)."""
CHANNEL_INVOKER_KIND = "channel"
"""The invoker kind of a run a channel started: its idempotency keys are scoped to the channel."""
WEBHOOK_SIGNATURE_HEADER = "X-Chamvi-Signature"
"""``v2=<hex HMAC-SHA256 of "<timestamp>.<delivery>.<raw body>">``, inbound and outbound alike."""
WEBHOOK_TIMESTAMP_HEADER = "X-Chamvi-Timestamp"
"""Unix seconds when the sender signed; outside the channel's tolerance the delivery is refused."""
WEBHOOK_DELIVERY_HEADER = "X-Chamvi-Delivery"
"""The sender's delivery id: the idempotency key of the runs one inbound event starts."""
LOCK_ID_PREFIX = "chamvi-lock:"

DEFAULT_MAX_STEPS = 20
DEFAULT_TIMEOUT = timedelta(seconds=900)
DEFAULT_APPROVAL_TIMEOUT = timedelta(hours=24)
APPROVAL_TIMEOUT_MAX = timedelta(milliseconds=2_147_483_647)
RUN_WAIT_TIMEOUT = timedelta(days=30)
"""How long a workflow may wait for a run it started (a tool call's sub-run, a schedule's fire): that
run may itself wait for people."""

NAME_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
NAME_MAX_LENGTH = 64
TRIGGER_KEY_MAX_LENGTH = 255

# Agents defined at runtime (chamvi.dynamic_agents): names stored in the artifact store.
AGENT_REVISIONS_PREFIX = "@agents"
"""Where the artifact store keeps runtime agents: ``@agents/<name>/<revision, 6 digits>.json``. No run's
folder starts with ``@`` (run ids are quoted into folder names, which turns ``@`` into ``%40``)."""
AGENT_REVISION_DIGITS = 6
AGENT_DEFINITION_MAX_BYTES = 262_144
"""The largest runtime agent definition, as JSON: it travels through a workflow's history."""
AGENT_DESCRIPTION_MAX_LENGTH = 1000
RUNTIME_AGENT_MAX_STEPS = 1000
"""The highest ``budget.max_steps`` a runtime agent may ask for (a code agent is not bounded)."""
ARTIFACT_INDEX_DIGITS = 4
"""Artifact ids are ``<run_id>.0000``, ``<run_id>.0001``, ...: stored in references and typed by people."""
ARTIFACT_ID_PATTERN = RUN_ID_PATTERN.removesuffix("$") + r"\.([0-9]{4}|[1-9][0-9]{4,})$"
"""An artifact id the API takes: a run id and the artifact's index, as ``artifact_id`` writes it."""
ARTIFACT_ID_MAX_LENGTH = RUN_ID_MAX_LENGTH + 1 + ARTIFACT_INDEX_DIGITS
ARTIFACT_MEDIA_TYPE_PATTERN = r"^[a-z0-9][a-z0-9!#$&^_.+-]*/[a-z0-9][a-z0-9!#$&^_.+-]*$"
"""The seed's ``isArtifactMediaType``: ``type/subtype``, no parameters (``; charset=utf-8``)."""
INLINE_PART_MAX_BYTES = 512 * 1024
"""The most bytes an image or file part holds inline (configured instructions): Temporal warns over
512 KiB, and anything larger belongs in the artifact store, referenced, or behind a URL."""
DEFAULT_ATTACHMENT_MAX_BYTES = 20 * 1024 * 1024
"""The size limit per attachment unless ``CHAMVI_ATTACHMENT_MAX_BYTES`` says otherwise."""
TOOL_RESULT_MAX_BYTES = 1_048_576
"""The largest tool result (as stored) a run accepts: Temporal refuses a payload over 2 MB and warns
over 512 KiB; a larger result is a tool error the model sees."""

# Metric names: dashboards and alerts are written against them. Counters of transitions rather than
# gauges, because a run moves between workers: runs in a status now = entered - left, summed over workers.
METRIC_RUNS_ENTERED = "chamvi_runs_entered"
"""Counter {agent, status}: runs that entered a status (queued, running, waiting, completed, ...)."""
METRIC_RUNS_LEFT = "chamvi_runs_left"
"""Counter {agent, status}: runs that left a status; approvals waiting = entered - left of ``waiting``."""
METRIC_STEPS = "chamvi_steps"
"""Counter {agent, kind}: model calls (``llm``) and finished tool calls (``tool``)."""
METRIC_TOKENS = "chamvi_tokens"
"""Counter {agent, model, direction}: tokens the provider reported, ``input`` and ``output``."""
METRIC_KNOWLEDGE_PASS_DURATION = "chamvi_knowledge_pass_duration"
"""Histogram {collection, outcome} in milliseconds: one knowledge pass, whatever its outcome."""

# Agent state (chamvi.state): names stored in Temporal history or Qdrant, typed by people in the CLI.
AGENT_STATE_LIST_WORKFLOW = "AgentStateList"
"""A short workflow per ``chamvi state list``: the worker that holds Qdrant reads the page."""
AGENT_STATE_LIST_ID_PREFIX = "state-list-"
ACTIVITY_STATE_LIST = "chamvi.state_list"
STATE_COLLECTION_PATTERN = r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$"
"""A state collection's name: it becomes part of tool names (``state_<name>_upsert``) and of a Qdrant
collection's name (``<prefix>__state__<agent>__<name>``), so single underscores only."""
STATE_COLLECTION_MAX_LENGTH = 40
STATE_KEY_MAX_LENGTH = 255
STATE_VALUE_MAX_BYTES = 262_144
"""The largest item or key-value entry, as JSON: state holds small records; files are artifacts."""
STATE_PAGE_MAX_BYTES = 524_288
"""A listed page's values at most (one item always): a page is one payload in history, warned at 512 KiB."""

# Skills (chamvi.skills): tool names the model calls and stored layouts in the artifact store.
TOOL_SKILL_LOAD = "skill_load"
"""The tool that returns one skill whole: its instructions and the list of its files."""
TOOL_SKILL_READ = "skill_read"
"""The tool that returns one text file of a skill, size-capped."""
SKILL_TOOL_NAMES = (TOOL_SKILL_LOAD, TOOL_SKILL_READ)
SKILL_FILE = "SKILL.md"
"""The file that makes a folder a skill (the Agent Skills format): front matter, then instructions."""
SKILL_DESCRIPTION_MAX_LENGTH = 1024
"""The Agent Skills format's limit on a skill's description, in characters."""
SKILLS_STORE_PREFIX = "skills"
"""The artifact store's folder of skill copies: ``skills/catalogs/<version>.json`` (a catalog's
manifest, written last), ``skills/blobs/<sha256>`` (file contents) and ``skills/pins/<key>.json``
(the commit a git source's branch or tag resolved to). Run folders are ``run-...``: no clash."""

# Conversations (chamvi.conversations): one workflow per conversation, each turn an ordinary AgentRun.
CONVERSATION_WORKFLOW = "Conversation"
CONVERSATION_ID_PREFIX = "conversation:"
"""The workflow of conversation ``c-1`` of agent ``support`` is ``conversation:support:c-1``."""
UPDATE_SEND_MESSAGE = "send_message"
"""Takes one message, idempotent per message id; answers the turn's run id once the message is queued."""
QUERY_CONVERSATION = "conversation"
CONVERSATION_TRIGGER = "conversation"
"""The ``trigger`` of a turn's run."""
ACTIVITY_CONVERSATION_LOAD = "chamvi.conversation_load"
ACTIVITY_CONVERSATION_SEEN = "chamvi.conversation_seen"
ACTIVITY_CONVERSATION_RECORD_TURN = "chamvi.conversation_record_turn"
ACTIVITY_CONVERSATION_SUMMARIZE = "chamvi.conversation_summarize"
ACTIVITY_CONVERSATION_REPLY = "chamvi.conversation_reply"
CONVERSATIONS_STORE_PREFIX = "conversations"
"""Where the artifact store keeps transcripts: ``conversations/<agent>/<id>/...`` (run ids start with
``run-``, so no run's artifacts share it)."""
CONVERSATION_TURNS_PER_RUN = 100
"""Turns one ``Conversation`` workflow run takes before it continues as new (sooner when Temporal
suggests it): its history stays a few hundred events, whatever the conversation's length."""
CONVERSATION_QUEUE_MAX = 1000
"""Messages that may wait for their turn at once; one more is refused until turns catch up."""
CONVERSATION_QUEUE_FULL_RETRY_SECONDS = 30
"""The ``Retry-After`` of a message refused because the queue is full: a turn or a few should end by then."""
CONVERSATION_SENDS_IN_FLIGHT = 4
"""Messages one client has in flight to one conversation at once; the others wait in the client, in
arrival order. Temporal admits 10 updates in flight per workflow (``history.maxInFlightUpdates``) and
refuses the rest with RESOURCE_EXHAUSTED: a burst of callers all retrying on their own kept updates
refused and aborted for seconds, and the unlucky ones answered 503. Four leave room for a second
process sending to the same conversation."""
CONVERSATION_SEND_RETRY_SECONDS = 5
"""The ``Retry-After`` of a message Temporal did not take (too many in flight, or unavailable)."""
CONVERSATION_SEEN_IDS = 500
"""Message ids the workflow remembers; an older one is looked up in the store."""
CONVERSATION_ID_MAX_LENGTH = 200
CONVERSATION_MESSAGE_MAX_CHARS = 100_000
"""The longest message text: larger content travels as attachments, by reference."""
