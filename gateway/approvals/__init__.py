"""A person's yes before a tool runs: ``approval:`` on a tool (and in ``overrides:`` and a source's ``tools:``), or
the ``approvals: {destructive: true}`` setting for every tool annotated destructive.

``config`` reads what is declared; ``records`` keeps requests and decisions in the shared state (memory, or Redis
in cluster mode: any replica sees a decision made on another); ``gate`` is the check ``invoke`` runs before any
filter or binding, on every surface (REST, MCP, chat, the CLI, ``call_tool``), and the chat loop before it hands a
browser tool back to its caller (``gateway.loop.calls.approved``).

A call that needs an approval and has none is asked of the calling client's user where the client can answer
(MCP form elicitation, when ``caller`` is an approver), else waits up to the approval's ``timeout_s`` for an
approver's decision (``POST /approvals/{id}``), else returns at once as pending with the approval's id (REST:
``202`` and its status URL). An approval is bound to the tool, the exact arguments (their SHA-256) and the caller,
is used by one call, and expires; nothing a model sends — a tool call, an argument, a chat message — can grant
one, and no caller approves their own call out of band (``caller`` as an approver trusts the calling client
software to ask a person: off by default).
"""
