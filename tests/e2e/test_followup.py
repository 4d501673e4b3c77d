"""Follow-up chats end to end in all four real host CLIs: chat 2 builds on chat 1 in other words.

Everything is real except the model, as in the other e2e tests: ./install.sh into a temporary
prefix, `egg install <host>` into the host's temporary HOME, `egg init` in a fresh project per
scenario, then three chats of the real CLI against its scripted local model server.

A scenario is a small codebase in one language (SCENARIOS below). Chat 1 asks where or how
something is done, searches with grep and reads the file it found (the host's shell tool) and
answers naming the function, the file and the value. Chat 2 is what a user types next in a NEW
chat: short, plain words, few identifiers and few words shared with chat 1's request, and of
varied intent (change what chat 1 found, why it is so, a test of it, where else it counts, what
it does). Its first model request must carry chat 1's work in the handoff, in the channel the
host uses for it (Codex: a developer message; Claude Code: the UserPromptSubmit system reminder;
Gemini CLI: appended to the prompt; OpenCode: a synthetic part after it). Chat 3, about
something outside the project, must be handed nothing.

One test per host, each over three scenarios (HOST_SCENARIOS: six scenarios in six languages
across the four hosts, every host given at least one "change" follow-up). Each test runs all its
scenarios before it fails on a missing follow-up handoff, so its message lists every scenario
that missed and what chat 2 got instead; a broken harness (a chat failing, chat 1 not recorded,
a handoff in chat 1 or chat 3) fails at once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from claude_harness import ClaudeHome
from codex_harness import CodexHome, wait_until
from fake_anthropic_server import FakeAnthropicServer, hook_contexts
from fake_anthropic_server import tool_results as claude_tool_results
from fake_gemini_server import FakeGeminiServer, function_responses
from fake_gemini_server import user_texts as gemini_user_texts
from fake_model_server import FakeModelServer, developer_messages, function_call_outputs
from fake_openai_server import FakeOpenAIServer
from fake_openai_server import tool_results as openai_tool_results
from fake_openai_server import user_texts as openai_user_texts
from gemini_harness import GeminiHome
from opencode_harness import OpenCodeHome
from test_codex_eggshell import _egg

pytestmark = pytest.mark.e2e

MARK = "EGGSHELL PRIOR WORK"
CHAT2_REPLY = "Going by what was found before, here is the plan."
CHAT3_REPLY = "Happy to help with that."


# --------------------------------------------------------------------------------------------
# The scenarios: a small project each, chat 1 (search, read, answer), chat 2, chat 3


@dataclass(frozen=True)
class Scenario:
    """A project and its chats. ``chats`` is a transcript: ``> `` a user's prompt (chat 1, then
    its follow-up chat 2, then the unrelated chat 3), ``$ `` chat 1's shell commands (a grep, then
    a read of the file it found), ``< `` chat 1's answer (its lines joined by spaces)."""

    name: str
    intent: str  # of chat 2: change, why, test, where-else, behaviour
    chats: str
    files: dict  # path -> text

    def _lines(self, mark: str) -> list[str]:
        return [line[len(mark):] for line in self.chats.strip().splitlines() if line.startswith(mark)]

    chat1 = property(lambda self: self._lines("> ")[0])
    chat2 = property(lambda self: self._lines("> ")[1])
    chat3 = property(lambda self: self._lines("> ")[2])
    commands = property(lambda self: self._lines("$ "))
    answer = property(lambda self: " ".join(self._lines("< ")))

    def grep_line(self) -> str | None:
        """A line chat 1's `grep -rn[i] WORD DIR` prints (`path:N:line`): the first hit in the file it reads next."""
        _, flags, word, _ = self.commands[0].split()
        path = self.commands[1].split()[-1]
        for n, line in enumerate(self.files[path].splitlines(), 1):
            if word.lower() in line.lower() if "i" in flags else word in line:
                return "%s:%d:%s" % (path, n, line)
        return None


PY_RENTAL = Scenario(
    name="python-rental", intent="change",
    chats="""
> Where is the late fee computed and what rate does it use?
$ grep -rni late rental
$ sed -n 1,30p rental/fees.py
< The late fee is computed by late_fee() in rental/fees.py: LATE_FEE_RATE = Decimal("0.015"), 1.5% of the
< unpaid balance per started month, for at most MAX_LATE_MONTHS = 3 months; Invoice.amount_due in
< rental/invoice.py adds it.
> If finance wants 2% instead, what do I have to touch?
> Suggest three names for a grey kitten.
""",
    files={
        "rental/__init__.py": '"""Equipment rental: bookings, returns and what customers owe."""\n',
        "rental/fees.py": '''"""What a customer owes beyond the rental itself."""

from decimal import ROUND_HALF_UP, Decimal

# Charged on the unpaid balance for each started month past the due date.
LATE_FEE_RATE = Decimal("0.015")
MAX_LATE_MONTHS = 3  # collections takes over after that
DAMAGE_SHARE = {"scratch": Decimal("0.05"), "dent": Decimal("0.20"), "broken": Decimal("1")}


def late_fee(balance: Decimal, months_late: int) -> Decimal:
    """The late fee on `balance` after `months_late` started months, rounded to cents."""
    months = min(max(months_late, 0), MAX_LATE_MONTHS)
    fee = balance * LATE_FEE_RATE * months
    return fee.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def damage_fee(item_value: Decimal, severity: str) -> Decimal:
    return (item_value * DAMAGE_SHARE[severity]).quantize(Decimal("0.01"))
''',
        "rental/invoice.py": '''"""Invoices for finished rentals."""

from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal

from rental.fees import late_fee


@dataclass
class Invoice:
    customer: str
    due: date
    lines: list = field(default_factory=list)  # (description, amount)
    paid: Decimal = Decimal("0")

    def balance(self) -> Decimal:
        return sum((amount for _, amount in self.lines), Decimal("0")) - self.paid

    def amount_due(self, today: date) -> Decimal:
        if today <= self.due:
            return self.balance()
        started = (today.year - self.due.year) * 12 + today.month - self.due.month + (today.day > self.due.day)
        return self.balance() + late_fee(self.balance(), started)
''',
        "tests/test_fees.py": '''from decimal import Decimal

from rental.fees import damage_fee, late_fee


def test_nothing_is_charged_on_time():
    assert late_fee(Decimal("200.00"), 0) == Decimal("0.00")


def test_the_fee_stops_growing_after_three_months():
    assert late_fee(Decimal("100.00"), 12) == late_fee(Decimal("100.00"), 3)


def test_a_broken_item_costs_its_value():
    assert damage_fee(Decimal("80.00"), "broken") == Decimal("80.00")
''',
    },
)

TS_LOCKOUT = Scenario(
    name="typescript-lockout", intent="why",
    chats="""
> How does the app decide to block someone who keeps typing the wrong password?
$ grep -rni lock src
$ sed -n 1,30p src/auth/lockout.ts
< registerFailure() in src/auth/lockout.ts locks the account once MAX_FAILED_ATTEMPTS = 5 failures fall
< within FAILURE_WINDOW_MS (10 minutes); the lock lasts LOCK_DURATION_MS = 15 minutes, and login() in
< src/auth/login.ts refuses while isLocked() says so.
> Why is it this strict? Support keeps hearing from people who got stuck.
> What is a good stretch for a stiff lower back?
""",
    files={
        "package.json": '{"name": "accounts", "private": true, "scripts": {"test": "vitest run"}}\n',
        "src/auth/lockout.ts": '''// Locking an account after repeated bad passwords.
// Numbers from the 2023 security review (SEC-114): five tries stop online guessing, and a
// 15 minute lock makes scripted attacks pointless without sending everyone to support.
export const MAX_FAILED_ATTEMPTS = 5;
export const FAILURE_WINDOW_MS = 10 * 60 * 1000;
export const LOCK_DURATION_MS = 15 * 60 * 1000;

export interface LoginRecord {
  failures: number[]; // times of recent failed attempts
  lockedUntil?: number;
}

export function registerFailure(record: LoginRecord, now: number): LoginRecord {
  const recent = record.failures.filter((t) => now - t < FAILURE_WINDOW_MS);
  recent.push(now);
  if (recent.length >= MAX_FAILED_ATTEMPTS) {
    return { failures: [], lockedUntil: now + LOCK_DURATION_MS };
  }
  return { failures: recent, lockedUntil: record.lockedUntil };
}

export function isLocked(record: LoginRecord, now: number): boolean {
  return record.lockedUntil !== undefined && now < record.lockedUntil;
}
''',
        "src/auth/login.ts": '''import { isLocked, LoginRecord, registerFailure } from "./lockout";
import { verifyPassword } from "./passwords";

export type LoginResult = "ok" | "bad-password" | "locked";

export async function login(records: Map<string, LoginRecord>, user: string, password: string,
                            now = Date.now()): Promise<LoginResult> {
  const record = records.get(user) ?? { failures: [] };
  if (isLocked(record, now)) return "locked";
  if (await verifyPassword(user, password)) {
    records.set(user, { failures: [] });
    return "ok";
  }
  records.set(user, registerFailure(record, now));
  return "bad-password";
}
''',
        "src/auth/passwords.ts": '''import { scrypt, timingSafeEqual } from "node:crypto";
import { promisify } from "node:util";
import { hashFor } from "../db/users";

const derive = promisify(scrypt);

export async function verifyPassword(user: string, password: string): Promise<boolean> {
  const stored = await hashFor(user);
  if (!stored) return false;
  const key = (await derive(password, stored.salt, 64)) as Buffer;
  return timingSafeEqual(key, stored.hash);
}
''',
        "test/lockout.test.ts": '''import { describe, expect, it } from "vitest";
import { isLocked, registerFailure } from "../src/auth/lockout";

describe("registerFailure", () => {
  it("locks after the fifth failure in a row", () => {
    let record = { failures: [] as number[] };
    for (let i = 0; i < 5; i++) record = registerFailure(record, 1_000 + i);
    expect(isLocked(record, 2_000)).toBe(true);
  });
});
''',
    },
)

GO_RETRY = Scenario(
    name="go-retry", intent="test",
    chats="""
> When a call to the warehouse service fails, how many times do we try again and how long do we wait in between?
$ grep -rn attempt client
$ sed -n 1,45p client/retry.go
< doWithRetry() in client/retry.go sends a request up to maxAttempts = 4 times on network errors and 5xx
< answers, pausing backoff(n) in between: baseDelay = 200ms doubled each retry (200ms, 400ms, 800ms),
< never more than maxDelay = 2s.
> Could you write a unit test that pins that schedule down?
> Give me a haiku about autumn leaves.
""",
    files={
        "go.mod": "module example.com/inventory\n\ngo 1.22\n",
        "client/retry.go": '''package client

import (
	"context"
	"net/http"
	"time"
)

const (
	maxAttempts = 4
	baseDelay   = 200 * time.Millisecond
	maxDelay    = 2 * time.Second
)

// backoff is the pause before retry n (n >= 1): baseDelay doubled each time, at most maxDelay.
func backoff(n int) time.Duration {
	d := baseDelay << (n - 1)
	if d > maxDelay {
		return maxDelay
	}
	return d
}

// doWithRetry sends req up to maxAttempts times, again on network errors and 5xx answers.
func doWithRetry(ctx context.Context, c *http.Client, req *http.Request) (*http.Response, error) {
	var resp *http.Response
	var err error
	for attempt := 0; attempt < maxAttempts; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(backoff(attempt)):
			}
		}
		resp, err = c.Do(req.WithContext(ctx))
		if err == nil && resp.StatusCode < 500 {
			return resp, nil
		}
		if err == nil && attempt < maxAttempts-1 {
			resp.Body.Close()
		}
	}
	return resp, err
}
''',
        "client/client.go": '''package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// Client talks to the warehouse API.
type Client struct {
	BaseURL string
	HTTP    *http.Client
}

// Stock returns the units on hand for a SKU.
func (c *Client) Stock(ctx context.Context, sku string) (int, error) {
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/stock/%s", c.BaseURL, sku), nil)
	if err != nil {
		return 0, err
	}
	resp, err := doWithRetry(ctx, c.HTTP, req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var body struct{ Units int }
	return body.Units, json.NewDecoder(resp.Body).Decode(&body)
}
''',
        "cmd/sync/main.go": '''package main

import (
	"context"
	"log"
	"net/http"
	"os"

	"example.com/inventory/client"
)

func main() {
	c := &client.Client{BaseURL: os.Getenv("WAREHOUSE_URL"), HTTP: http.DefaultClient}
	for _, sku := range os.Args[1:] {
		units, err := c.Stock(context.Background(), sku)
		if err != nil {
			log.Fatalf("%s: %v", sku, err)
		}
		log.Printf("%s: %d", sku, units)
	}
}
''',
        "client/client_test.go": '''package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestStockReadsUnits(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte(`{"Units": 7}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL, HTTP: srv.Client()}
	if units, err := c.Stock(context.Background(), "A-1"); err != nil || units != 7 {
		t.Fatalf("got %d, %v", units, err)
	}
}
''',
    },
)

RUST_THUMBS = Scenario(
    name="rust-thumbnails", intent="where-else",
    chats="""
> How many thumbnails do we hold in memory before old ones get thrown out?
$ grep -rni capacity src
$ sed -n 1,45p src/cache.rs
< ThumbCache in src/cache.rs keeps at most THUMB_CACHE_CAPACITY = 512 thumbnails; insert() evicts the
< least recently used one once it is full.
> Does anything else depend on that number?
> How many cups are in a litre?
""",
    files={
        "Cargo.toml": '[package]\nname = "gallery"\nversion = "0.3.1"\nedition = "2021"\n',
        "src/lib.rs": "pub mod cache;\npub mod render;\npub mod stats;\n",
        "src/cache.rs": '''//! Rendered thumbnails kept in memory, least recently used out first.

use std::collections::{HashMap, VecDeque};

/// How many thumbnails the cache keeps before it evicts.
pub const THUMB_CACHE_CAPACITY: usize = 512;

pub struct ThumbCache {
    capacity: usize,
    entries: HashMap<String, Vec<u8>>,
    order: VecDeque<String>,
}

impl ThumbCache {
    pub fn new(capacity: usize) -> Self {
        ThumbCache { capacity, entries: HashMap::new(), order: VecDeque::new() }
    }

    pub fn get(&mut self, key: &str) -> Option<&Vec<u8>> {
        if self.entries.contains_key(key) {
            self.order.retain(|k| k != key);
            self.order.push_back(key.to_string());
        }
        self.entries.get(key)
    }

    pub fn insert(&mut self, key: String, png: Vec<u8>) {
        if self.entries.len() >= self.capacity && !self.entries.contains_key(&key) {
            if let Some(oldest) = self.order.pop_front() {
                self.entries.remove(&oldest);
            }
        }
        self.order.retain(|k| k != &key);
        self.order.push_back(key.clone());
        self.entries.insert(key, png);
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }
}
''',
        "src/render.rs": '''use crate::cache::{ThumbCache, THUMB_CACHE_CAPACITY};

pub struct Renderer {
    pub cache: ThumbCache,
}

impl Renderer {
    pub fn new() -> Self {
        Renderer { cache: ThumbCache::new(THUMB_CACHE_CAPACITY) }
    }

    pub fn thumbnail(&mut self, path: &str) -> Vec<u8> {
        if let Some(png) = self.cache.get(path) {
            return png.clone();
        }
        let png = scale_down(path);
        self.cache.insert(path.to_string(), png.clone());
        png
    }
}

fn scale_down(path: &str) -> Vec<u8> {
    path.as_bytes().iter().step_by(4).copied().collect()
}
''',
        "src/stats.rs": '''use crate::cache::{ThumbCache, THUMB_CACHE_CAPACITY};

/// Share of the thumbnail cache in use, for the /metrics page.
pub fn cache_fill(cache: &ThumbCache) -> f64 {
    cache.len() as f64 / THUMB_CACHE_CAPACITY as f64
}
''',
        "tests/cache.rs": '''use gallery::cache::ThumbCache;

#[test]
fn the_oldest_entry_goes_first() {
    let mut cache = ThumbCache::new(2);
    cache.insert("a".into(), vec![1]);
    cache.insert("b".into(), vec![2]);
    cache.insert("c".into(), vec![3]);
    assert!(cache.get("a").is_none());
    assert_eq!(cache.len(), 2);
}
''',
    },
)

RUBY_SHIPPING = Scenario(
    name="ruby-shipping", intent="change",
    chats="""
> At what order total does delivery become free?
$ grep -rni free lib
$ sed -n 1,30p lib/shop/shipping.rb
< Shop::Shipping.cost_for in lib/shop/shipping.rb makes shipping free once the subtotal reaches
< FREE_SHIPPING_MIN = 50.00; below that it charges FLAT_RATE = 4.99, and express adds 7.50.
> Marketing wants to drop that to 35 for the holidays. What needs editing?
> Recommend a board game for four players.
""",
    files={
        "Gemfile": 'source "https://rubygems.org"\n\ngem "minitest", "~> 5.20"\n',
        "lib/shop/shipping.rb": '''# frozen_string_literal: true

module Shop
  # What an order pays for delivery.
  module Shipping
    FREE_SHIPPING_MIN = 50.00
    FLAT_RATE = 4.99
    EXPRESS_SURCHARGE = 7.50

    def self.cost_for(order)
      base = order.subtotal >= FREE_SHIPPING_MIN ? 0.0 : FLAT_RATE
      order.express? ? base + EXPRESS_SURCHARGE : base
    end
  end
end
''',
        "lib/shop/order.rb": '''# frozen_string_literal: true

require_relative "shipping"

module Shop
  class Order
    attr_reader :items

    def initialize(items, express: false)
      @items = items
      @express = express
    end

    def express?
      @express
    end

    def subtotal
      items.sum { |item| item.price * item.quantity }
    end

    def total
      subtotal + Shipping.cost_for(self)
    end
  end
end
''',
        "lib/shop/cart_banner.rb": '''# frozen_string_literal: true

require_relative "shipping"

module Shop
  # The line shown above the cart.
  module CartBanner
    def self.text(order)
      missing = Shipping::FREE_SHIPPING_MIN - order.subtotal
      return "Your order ships free." if missing <= 0

      format("Add $%.2f more and your order ships free.", missing)
    end
  end
end
''',
        "test/shipping_test.rb": '''# frozen_string_literal: true

require "minitest/autorun"
require_relative "../lib/shop/order"

Item = Struct.new(:price, :quantity)

class ShippingTest < Minitest::Test
  def test_small_orders_pay_the_flat_rate
    assert_in_delta 4.99, Shop::Shipping.cost_for(Shop::Order.new([Item.new(10.0, 2)]))
  end

  def test_large_orders_ship_free
    assert_in_delta 0.0, Shop::Shipping.cost_for(Shop::Order.new([Item.new(60.0, 1)]))
  end
end
''',
    },
)

JS_RATELIMIT = Scenario(
    name="javascript-ratelimit", intent="behaviour",
    chats="""
> How many calls can one client make per minute before the API starts refusing them?
$ grep -rni limit src
$ sed -n 1,30p src/middleware/rateLimit.js
< rateLimit() in src/middleware/rateLimit.js allows MAX_REQUESTS = 100 requests per API key in each
< WINDOW_MS = 60000 ms (one minute) window; past that it answers 429 with a Retry-After header.
> And what does a caller get back once they go over?
> Translate 'good morning' into Portuguese.
""",
    files={
        "package.json": '{"name": "orders-api", "private": true, "main": "src/app.js", "scripts": {"test": "node --test"}}\n',
        "src/middleware/rateLimit.js": ''''use strict';

const WINDOW_MS = 60 * 1000;
const MAX_REQUESTS = 100;

const seen = new Map(); // api key -> { start, count }

function rateLimit(req, res, next) {
  const key = req.get('x-api-key') || req.ip;
  const now = Date.now();
  let entry = seen.get(key);
  if (!entry || now - entry.start >= WINDOW_MS) {
    entry = { start: now, count: 0 };
    seen.set(key, entry);
  }
  entry.count += 1;
  if (entry.count > MAX_REQUESTS) {
    const retryAfter = Math.ceil((entry.start + WINDOW_MS - now) / 1000);
    res.set('Retry-After', String(retryAfter));
    return res.status(429).json({ error: 'rate_limited', retryAfter });
  }
  return next();
}

module.exports = { rateLimit, WINDOW_MS, MAX_REQUESTS };
''',
        "src/app.js": ''''use strict';

const express = require('express');
const { rateLimit } = require('./middleware/rateLimit');
const orders = require('./routes/orders');

const app = express();
app.use(express.json());
app.use('/api', rateLimit, orders);

if (require.main === module) {
  app.listen(process.env.PORT || 3000);
}

module.exports = app;
''',
        "src/routes/orders.js": ''''use strict';

const express = require('express');

const router = express.Router();
const orders = [];

router.get('/orders', (req, res) => res.json(orders));

router.post('/orders', (req, res) => {
  const order = { id: orders.length + 1, ...req.body };
  orders.push(order);
  res.status(201).json(order);
});

module.exports = router;
''',
        "test/rateLimit.test.js": ''''use strict';

const test = require('node:test');
const assert = require('node:assert');
const { rateLimit } = require('../src/middleware/rateLimit');

test('the first call of a key goes through', () => {
  let passed = false;
  const req = { get: () => 'key-1', ip: '10.0.0.1' };
  rateLimit(req, {}, () => { passed = true; });
  assert.ok(passed);
});
''',
    },
)

SCENARIOS = (PY_RENTAL, TS_LOCKOUT, GO_RETRY, RUST_THUMBS, RUBY_SHIPPING, JS_RATELIMIT)
# Each scenario runs in two hosts; each host gets one of the two "change" follow-ups.
HOST_SCENARIOS = {
    "codex": (PY_RENTAL, GO_RETRY, RUST_THUMBS),
    "claude": (TS_LOCKOUT, RUBY_SHIPPING, JS_RATELIMIT),
    "gemini": (RUST_THUMBS, TS_LOCKOUT, PY_RENTAL),
    "opencode": (JS_RATELIMIT, RUBY_SHIPPING, GO_RETRY),
}


def _write_project(root, scenario: Scenario):
    for path, text in scenario.files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


# --------------------------------------------------------------------------------------------
# The hosts: how each one's server, home, shell step, tool outputs and handoff channel look


def _strings(value: Any) -> list[str]:
    """Every string inside a JSON value (a Gemini functionResponse holds its output in a dict)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@dataclass(frozen=True)
class Host:
    name: str  # as `egg install` takes it
    server: type
    home: Callable  # (root, server, binary, env) -> a *Home
    shell: Callable[[str], dict]  # a script step running a shell command
    outputs: Callable[[Any], list]  # a request -> the tool outputs the model was shown
    channel: Callable[[Any], list]  # a request -> the texts where this host puts hook context


HOSTS = {
    "codex": Host("codex", FakeModelServer,
                  lambda root, server, binary, env: CodexHome(root, server, codex=binary, env=env),
                  lambda cmd: {"exec": cmd}, function_call_outputs, developer_messages),
    "claude": Host("claude", FakeAnthropicServer,
                   lambda root, server, binary, env: ClaudeHome(root, server, claude=binary, env=env),
                   lambda cmd: {"bash": cmd}, lambda req: list(claude_tool_results(req).values()), hook_contexts),
    "gemini": Host("gemini", FakeGeminiServer,
                   lambda root, server, binary, env: GeminiHome(root, server, gemini=binary, env=env),
                   lambda cmd: {"shell": cmd}, lambda req: _strings(function_responses(req.body)),
                   lambda req: gemini_user_texts(req.body)),
    "opencode": Host("opencode", FakeOpenAIServer,
                     lambda root, server, binary, env: OpenCodeHome(root, server, opencode=binary, env=env),
                     lambda cmd: {"shell": cmd}, lambda req: openai_tool_results(req.body),
                     lambda req: openai_user_texts(req.body)),
}


def _scripts(host: Host, scenarios) -> dict:
    scripts = {}
    for sc in scenarios:
        scripts[sc.chat1] = [*map(host.shell, sc.commands), {"say": sc.answer}]
        scripts[sc.chat2] = [{"say": CHAT2_REPLY}]
        scripts[sc.chat3] = [{"say": CHAT3_REPLY}]
    return scripts


def _eggshell_texts(texts: list[str], n: int = 600) -> list[str]:
    """What Eggshell put in a channel (the texts naming it), cut, for a failure message."""
    return [t if len(t) <= n else t[:n] + "... (%d chars)" % len(t) for t in texts if "EGGSHELL" in t]


# --------------------------------------------------------------------------------------------
# The run


def _followups(host: Host, binary: str, prefix, tmp_path) -> None:
    scenarios = HOST_SCENARIOS[host.name]
    missed, got = [], []
    with host.server(_scripts(host, scenarios)) as server:
        data_root = tmp_path / "data"
        env = {"EGGSHELL_PREFIX": str(prefix), "EGGSHELL_DATA_ROOT": str(data_root)}
        home = host.home(tmp_path / host.name, server, binary, env)
        tool_env = home.env()
        _egg(prefix, ["install", host.name], tmp_path, tool_env)

        for sc in scenarios:
            project = _write_project(tmp_path / sc.name, sc)
            _egg(prefix, ["init"], project, tool_env)
            egg_file = project / ".eggs" / "work.egg"

            # Chat 1: search, read, answer; recorded as one turn, handed nothing (a fresh project).
            run1 = home.run(sc.chat1, project).check()
            assert sc.answer in run1.stdout, str(run1)
            reqs1 = server.requests_for(sc.chat1)
            assert [r.step for r in reqs1] == [0, 1, 2], (sc.name, [(r.step, r.reply) for r in reqs1])
            assert MARK not in json.dumps(reqs1[0].body), (sc.name, "chat 1 was handed work of another project")
            outputs = "\n".join(host.outputs(reqs1[-1]))
            assert sc.grep_line() in outputs, (sc.name, "chat 1's search did not run in the project", outputs[-3000:])
            # Codex's warm manager saves a turn within seconds of its Stop; the others save it before they exit.
            assert wait_until(egg_file.exists, timeout=60), "%s: chat 1 was not recorded:\n%s" % (sc.name, run1.stderr[-3000:])
            fsck = _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
            assert "1 turn," in fsck, (sc.name, fsck)

            # Chat 2, a new chat: the follow-up in other words; its first request should carry chat 1's work.
            run2 = home.run(sc.chat2, project).check()
            assert CHAT2_REPLY in run2.stdout, str(run2)
            reqs2 = server.requests_for(sc.chat2)
            assert reqs2, (sc.name, "the model never saw chat 2")
            channel = host.channel(reqs2[0])
            handoff = [t for t in channel if MARK in t and (sc.chat1 in t or sc.answer in t)]

            # Chat 3: nothing to do with the project; handed nothing.
            run3 = home.run(sc.chat3, project).check()
            assert CHAT3_REPLY in run3.stdout, str(run3)
            reqs3 = server.requests_for(sc.chat3)
            assert reqs3, (sc.name, "the model never saw chat 3")
            leaked = [r for r in reqs3 if MARK in json.dumps(r.body)]
            assert not leaked, (sc.name, "chat 3 (unrelated) was handed prior work", _eggshell_texts(host.channel(leaked[0])))

            # Every chat was recorded (Codex's last turn may land just after codex exec returns).
            def recorded(egg_file=egg_file, project=project):
                return "3 turns" in _egg(prefix, ["fsck", str(egg_file)], project, tool_env)
            wait_until(recorded, timeout=60, message="%s: 3 turns recorded" % sc.name)

            line = "%s %s (%s, chats %s): chat 2 %r" % (host.name, sc.name, sc.intent,
                                                        "/".join("%.1fs" % r.duration for r in (run1, run2, run3)), sc.chat2)
            if handoff:
                got.append(line + ": handed chat 1's work")
            else:
                missed.append(line + ": no handoff of chat 1 in its first request; Eggshell's text there: %r"
                              % _eggshell_texts(channel))

        hook_log = data_root / "logs" / "hook.log"
        assert not hook_log.exists() or not hook_log.read_text().strip(), hook_log.read_text()
    print("\n".join(got + missed))
    assert not missed, "follow-ups handed nothing (%d of %d):\n%s" % (len(missed), len(scenarios), "\n".join(missed))


def test_coverage_of_the_scenarios():
    """The rotation uses every scenario (five or more, in four or more languages) and gives each host a change."""
    used = {sc.name for scs in HOST_SCENARIOS.values() for sc in scs}
    assert used == {sc.name for sc in SCENARIOS} and len(SCENARIOS) >= 5
    assert len({sc.name.split("-")[0] for sc in SCENARIOS}) >= 4
    assert all(any(sc.intent == "change" for sc in scs) for scs in HOST_SCENARIOS.values())
    prompts = [p for sc in SCENARIOS for p in (sc.chat1, sc.chat2, sc.chat3)]
    assert not [(a, b) for a in prompts for b in prompts if a != b and a in b]  # each picks its own script
    for sc in SCENARIOS:  # chat 1 greps a directory, then reads a file of it that its grep finds
        assert len(sc.commands) == 2 and sc.commands[0].startswith("grep -rn") and sc.commands[1].startswith("sed -n "), sc.name
        assert sc.grep_line() and sc.grep_line().startswith(sc.commands[0].split()[-1] + "/"), sc.name


def test_codex_followups(codex_bin, prefix, tmp_path):
    _followups(HOSTS["codex"], codex_bin, prefix, tmp_path)


def test_claude_followups(claude_bin, prefix, tmp_path):
    _followups(HOSTS["claude"], claude_bin, prefix, tmp_path)


def test_gemini_followups(gemini_bin, prefix, tmp_path):
    _followups(HOSTS["gemini"], gemini_bin, prefix, tmp_path)


def test_opencode_followups(opencode_bin, prefix, tmp_path):
    _followups(HOSTS["opencode"], opencode_bin, prefix, tmp_path)
