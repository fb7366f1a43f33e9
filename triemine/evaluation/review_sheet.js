(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("sheet-data").textContent);
  var pairs = data.pairs;
  var NAMES = { y: "translation", n: "not a translation", p: "partial", s: "skipped" };
  var state = load();

  function $(id) { return document.getElementById(id); }
  function keyOf(pair) { return pair.src_id + "\t" + pair.tgt_id; }

  function load() {
    var fresh = { answers: {}, pos: 0 };
    try {
      var saved = JSON.parse(window.localStorage.getItem(data.storage_key) || "null");
      if (saved && typeof saved.answers === "object" && saved.answers !== null) {
        fresh.answers = saved.answers;
        fresh.pos = Math.min(Math.max(0, saved.pos | 0), Math.max(0, pairs.length - 1));
      }
    } catch (err) { /* no storage, or a damaged entry: start afresh */ }
    return fresh;
  }

  function save() {
    try {
      window.localStorage.setItem(data.storage_key, JSON.stringify(state));
    } catch (err) {
      $("status").textContent = "This browser keeps no answers (storage refused): export " +
        "them before closing the page.";
    }
  }

  function answerOf(pair) {
    var a = state.answers[keyOf(pair)];
    return Object.prototype.hasOwnProperty.call(NAMES, a) ? a : null;
  }

  function answeredCount() {
    return pairs.filter(function (pair) { return answerOf(pair) !== null; }).length;
  }

  function render() {
    var done = answeredCount();
    $("fingerprint").textContent = data.fingerprint;
    $("done").textContent = done + " answered";
    $("bar").style.width = (pairs.length ? 100 * done / pairs.length : 0) + "%";
    if (!pairs.length) {
      $("counter").textContent = "no pairs to read";
      return;
    }
    var pair = pairs[state.pos];
    var got = answerOf(pair);
    $("counter").textContent = "pair " + (state.pos + 1) + " of " + pairs.length;
    $("src").textContent = pair.src;
    $("tgt").textContent = pair.tgt;
    $("prob").textContent = pair.prob.toFixed(3);
    $("current").textContent = got ? "answered: " + NAMES[got] : "not answered yet";
    document.querySelectorAll("button[data-answer]").forEach(function (b) {
      b.classList.toggle("picked", b.getAttribute("data-answer") === got);
    });
    if (done === pairs.length) {
      $("status").textContent = "Every pair is answered: press e to export answers.tsv.";
    }
  }

  function answer(a) {
    if (!pairs.length) { return; }
    state.answers[keyOf(pairs[state.pos])] = a;
    if (state.pos < pairs.length - 1) { state.pos += 1; }
    save();
    render();
  }

  function go(step) {
    state.pos = Math.min(Math.max(0, state.pos + step), Math.max(0, pairs.length - 1));
    save();
    render();
  }

  // The answers file: the header the sheet carries, then one row per answered pair.
  function answersTsv() {
    var out = data.answers_header;
    pairs.forEach(function (pair) {
      var a = answerOf(pair);
      if (a !== null) { out += pair.src_id + "\t" + pair.tgt_id + "\t" + a + "\n"; }
    });
    return out;
  }

  function download() {
    var blob = new Blob([answersTsv()], { type: "text/tab-separated-values;charset=utf-8" });
    var url = URL.createObjectURL(blob);
    var link = document.createElement("a");
    link.href = url;
    link.download = "answers.tsv";
    document.body.appendChild(link);
    link.click();
    link.remove();
    window.setTimeout(function () { URL.revokeObjectURL(url); }, 10000);
    $("status").textContent = "Exported " + answeredCount() + " answers as answers.tsv.";
  }

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) { return; }
    var k = ev.key.length === 1 ? ev.key.toLowerCase() : ev.key;
    if (Object.prototype.hasOwnProperty.call(NAMES, k)) { answer(k); }
    else if (k === "ArrowLeft" || k === "Backspace") { go(-1); }
    else if (k === "ArrowRight") { go(1); }
    else if (k === "e") { download(); }
    else { return; }
    ev.preventDefault();
  });
  document.querySelectorAll("button[data-answer]").forEach(function (b) {
    b.addEventListener("click", function () { answer(b.getAttribute("data-answer")); });
  });
  $("back").addEventListener("click", function () { go(-1); });
  $("next").addEventListener("click", function () { go(1); });
  $("export").addEventListener("click", download);

  window.trieReview = { answersTsv: answersTsv, download: download, pairs: pairs };
  render();
}());
