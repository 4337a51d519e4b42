/*
 * Search from disk: a stand-in for `Worker` when the site is opened as file://.
 *
 * mkdocs-material runs its search in a Web Worker, which Chromium will not start from a file://
 * page. Its offline plugin expects a shim that runs the worker's script in a hidden iframe
 * instead (and would fetch one from unpkg.com, which a reader offline cannot reach: mkdocs.yml
 * names this file in its place). The worker's script sees the iframe as its global scope:
 * `addEventListener("message", …)` receives what the page posts, `postMessage` answers the page,
 * and `importScripts` loads scripts in order (returning a promise, which the search worker awaits).
 * Served over http(s) the browser's own Worker is left alone. tests/test_docs_site.py checks that
 * the search box finds results from disk.
 */
(function () {
  "use strict"
  if (location.protocol !== "file:" || typeof document === "undefined")
    return

  function loadScript(doc, url) {
    return new Promise(function (resolve, reject) {
      var script = doc.createElement("script")
      script.src = url
      script.onload = function () { resolve() }
      script.onerror = function () { reject(new Error("cannot load " + url)) }
      doc.body.appendChild(script)
    })
  }

  function IFrameWorker(url) {
    var target = new EventTarget()
    var self = this
    var frame = document.createElement("iframe")
    var queue = []
    var ready = false
    this.onmessage = null
    this.onerror = null
    this.addEventListener = target.addEventListener.bind(target)
    this.removeEventListener = target.removeEventListener.bind(target)

    function emit(type, init) {
      var ev = type === "message" ? new MessageEvent("message", init) : new ErrorEvent("error", init)
      setTimeout(function () {
        target.dispatchEvent(ev)
        var handler = type === "message" ? self.onmessage : self.onerror
        if (typeof handler === "function")
          handler.call(self, ev)
      }, 0)
    }

    frame.hidden = true
    frame.setAttribute("aria-hidden", "true")
    document.body.appendChild(frame)
    var scope = frame.contentWindow
    var doc = frame.contentDocument
    scope.postMessage = function (data) {
      emit("message", { data: structuredClone(data) })
    }
    scope.importScripts = function () {
      var urls = Array.prototype.slice.call(arguments)
      return urls.reduce(function (done, u) {
        return done.then(function () { return loadScript(doc, new URL(u, url).href) })
      }, Promise.resolve())
    }
    this._deliver = function (data) {
      scope.dispatchEvent(new scope.MessageEvent("message", { data: structuredClone(data) }))
    }
    this.postMessage = function (data) {
      if (ready)
        self._deliver(data)
      else
        queue.push(data)
    }
    this.terminate = function () {
      queue = []
      frame.remove()
    }
    loadScript(doc, url).then(function () {
      ready = true
      queue.splice(0).forEach(self._deliver)
    }, function (err) {
      emit("error", { message: err.message, error: err })
    })
  }

  window.Worker = function (url) {
    return new IFrameWorker(new URL(url, document.baseURI).href)
  }
})()
