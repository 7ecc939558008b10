// Reads the task form (<form id="task-form">) of the page this runs in: every named field's value.
GatewayTools.register('task_form_read', {
    execute: function (input) {
        var form = document.getElementById('task-form');
        if (!form) {
            throw new Error('This page has no task form (no <form id="task-form">).');
        }
        var values = {};
        ['title', 'customer', 'priority', 'due_date', 'description'].forEach(function (name) {
            var field = form.elements.namedItem(name);
            values[name] = field ? field.value : '';
        });
        return values;
    }
});
