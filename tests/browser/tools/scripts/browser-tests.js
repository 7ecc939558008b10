// Handlers for tests/browser: one throws, two never answer (window.waiting counts the calls they received).
GatewayTools.register('page_throws', {
    execute: function (input) {
        throw new Error('the form has no field ' + JSON.parse(input).field);
    }
});
['page_hangs', 'page_waits'].forEach(function (id) {
    GatewayTools.register(id, function () {
        window.waiting = (window.waiting || 0) + 1;
        return new Promise(function () {});
    });
});
