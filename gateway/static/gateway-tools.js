/*
 * gateway-tools.js — the tool gateway's browser runtime. Plain JavaScript: no build step, no dependencies.
 *
 * Load it from the gateway (<script src="https://gateway.example/client/gateway-tools.js">); it talks to the
 * gateway it was loaded from (or GatewayTools.url, if you set it).
 *
 *   GatewayTools.register(id, {execute: function (input, context) {...}})
 *       the handler of a client tool. `input` is the JSON arguments string; return a value or a Promise of one.
 *       A string holding JSON (e.g. JSON.stringify(result)) is read as that JSON value; throw to report an error.
 *   PW.AiTools.register(id, handler)        the same, so PlusWorkflow scripts run unchanged
 *   GatewayTools.load(ids)                  loads /client/scripts/<id>.js for each tool not registered yet
 *   GatewayTools.run(id, input, context)    runs a handler (loading its tool's script first if needed)
 *   GatewayTools.chat(messages, options)    a conversation through the gateway's /v1/chat/completions: the
 *                                           gateway runs server tools, this page runs the client tools it is
 *                                           handed, until the model answers. Resolves to {content, messages,
 *                                           executions, response}.
 *   GatewayTools.connect()                  a live bridge session: REST and MCP calls that name session.id run
 *                                           their client tools in this page. Resolves to {id, closed, close()}.
 *
 * Every handler run dispatches a "gatewaytools:executed" event on window with detail {tool, input, via,
 * value | error} — for activity logs.
 */
(function (global) {
  "use strict";

  var handlers = Object.create(null);  // tool id -> handler object with execute()
  var loading = Object.create(null);   // tool id -> Promise of its handler, while its script loads
  var current = global.document && global.document.currentScript;

  var GatewayTools = {
    url: current && current.src ? current.src.replace(/\/client\/gateway-tools\.js(?:[?#].*)?$/, "") : "",
    register: register,
    registered: function () { return Object.keys(handlers); },
    load: load,
    run: run,
    chat: chat,
    connect: connect
  };

  function register(id, handler) {
    if (typeof id !== "string" || !id) {
      throw new TypeError("GatewayTools.register: the first argument must be the tool's id");
    }
    if (typeof handler === "function") {
      handler = {execute: handler};
    }
    if (!handler || typeof handler.execute !== "function") {
      throw new TypeError("GatewayTools.register('" + id + "'): the handler needs an execute(input) function");
    }
    handlers[id] = handler;
  }

  function load(ids) {
    return Promise.all([].concat(ids).map(handlerOf));
  }

  function handlerOf(id) {
    if (handlers[id]) {
      return Promise.resolve(handlers[id]);
    }
    if (!loading[id]) {
      loading[id] = new Promise(function (resolve, reject) {
        var src = GatewayTools.url + "/client/scripts/" + encodeURIComponent(id) + ".js";
        var element = global.document.createElement("script");
        element.src = src;
        element.async = true;
        element.onload = function () {
          delete loading[id];
          if (handlers[id]) {
            resolve(handlers[id]);
          } else {
            reject(new Error("The script of tool '" + id + "' loaded but registered no handler for it."));
          }
        };
        element.onerror = function () {
          delete loading[id];
          element.remove();
          reject(new Error("No handler for tool '" + id + "' in this page, and its script could not be loaded " +
                           "from " + src + " (is it a client tool of this gateway?)."));
        };
        global.document.head.appendChild(element);
      });
    }
    return loading[id];
  }

  function run(id, input, context, via) {
    if (typeof input !== "string") {
      input = JSON.stringify(input === undefined ? {} : input);
    }
    var detail = {tool: id, input: input, via: via || "run"};
    return handlerOf(id)
      .then(function (handler) { return handler.execute(input, context || {}); })
      .then(function (value) {
        detail.value = value;
        announce(detail);
        return value;
      }, function (error) {
        detail.error = messageOf(error);
        announce(detail);
        throw error;
      });
  }

  function announce(detail) {
    if (typeof global.CustomEvent === "function") {
      global.dispatchEvent(new CustomEvent("gatewaytools:executed", {detail: detail}));
    }
  }

  function messageOf(error) {
    if (error && typeof error.message === "string" && error.message) {
      return error.message;
    }
    return String(error);
  }

  // -- chat: the gateway runs the loop; this page answers the client tool calls it is handed ----------------

  /*
   * options: model; gateway (the request's gateway extension: toolsets, tags, tools — side defaults to
   * "client", so tools with scope ALL run here too); headers (e.g. {Authorization: "Bearer ..."}); body (more
   * Chat Completions fields); maxRounds (hand-backs before giving up, default 16).
   */
  async function chat(messages, options) {
    options = options || {};
    var conversation = messages.slice();
    var executions = [];
    var rounds = options.maxRounds || 16;
    for (var round = 0; round <= rounds; round++) {
      var body = Object.assign({}, options.body, {
        messages: conversation,
        gateway: Object.assign({side: "client"}, options.gateway)
      });
      if (options.model) {
        body.model = options.model;
      }
      var response = await post("/v1/chat/completions", body, options.headers);
      executions = executions.concat(response.tool_executions || []);
      var choice = response.choices[0];
      var message = choice.message;
      conversation.push(message);
      if (choice.finish_reason !== "tool_calls" || !message.tool_calls || !message.tool_calls.length) {
        return {content: message.content, messages: conversation, executions: executions, response: response};
      }
      var results = await Promise.all(message.tool_calls.map(answerCall));
      conversation = conversation.concat(results);
    }
    throw new Error("The gateway kept handing back tool calls after " + rounds + " rounds; giving up.");
  }

  function answerCall(call) {
    var context = {tool_call_id: call.id};
    return run(call.function.name, call.function.arguments || "{}", context, "chat").then(function (value) {
      return {role: "tool", tool_call_id: call.id, content: asText(value)};
    }).catch(function (error) {
      return {role: "tool", tool_call_id: call.id, content: messageOf(error), is_error: true};
    });
  }

  function asText(value) {
    if (typeof value === "string") {
      return value;
    }
    return value === undefined ? "null" : JSON.stringify(value);
  }

  async function post(path, body, headers) {
    var response = await fetch(GatewayTools.url + path, {
      method: "POST",
      headers: Object.assign({"Content-Type": "application/json"}, headers),
      body: JSON.stringify(body)
    });
    var text = await response.text();
    var data;
    try {
      data = JSON.parse(text);
    } catch (e) {
      data = null;
    }
    if (!response.ok) {
      var error = data && data.error;
      var detail = error && typeof error === "object" ? error.message : error;
      throw new Error("The gateway answered " + response.status + ": " + (detail || text || response.statusText));
    }
    return data;
  }

  // -- bridge: a live session in which the gateway forwards REST and MCP calls to this page ----------------

  function connect() {
    return new Promise(function (resolve, reject) {
      var socket = new WebSocket(GatewayTools.url.replace(/^http/, "ws") + "/client/bridge");
      var session = null;
      var ended;
      var closed = new Promise(function (done) { ended = done; });
      socket.onmessage = function (event) {
        var message;
        try {
          message = JSON.parse(event.data);
        } catch (e) {
          return;
        }
        if (message.type === "session" && !session) {
          session = {
            id: message.session,
            closed: closed,
            close: function () { socket.close(1000, "closed by the page"); return closed; }
          };
          resolve(session);
        } else if (message.type === "call") {
          answerBridge(socket, message);
        }
      };
      socket.onclose = function (event) {
        if (!session) {
          reject(new Error("The gateway refused the bridge session (WebSocket closed with code " + event.code +
                           "); is this page's origin in the gateway's allowed_origins?"));
        }
        ended({code: event.code, reason: event.reason});
      };
    });
  }

  function answerBridge(socket, call) {
    run(call.tool, call.input, call.context, "bridge").then(function (value) {
      return JSON.stringify({type: "result", id: call.id, value: value === undefined ? null : value});
    }).catch(function (error) {  // the handler failed, or its value is not JSON (a cycle, a BigInt)
      return JSON.stringify({type: "error", id: call.id, message: messageOf(error)});
    }).then(function (frame) {
      if (socket.readyState === WebSocket.OPEN) {
        socket.send(frame);
      }
    });
  }

  global.GatewayTools = GatewayTools;
  // PlusWorkflow's registry: scripts written for PW.AiTools.register run unchanged.
  global.PW = global.PW || {};
  global.PW.AiTools = global.PW.AiTools || {};
  global.PW.AiTools.register = register;
})(window);
