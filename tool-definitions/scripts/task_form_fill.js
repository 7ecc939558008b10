// Fills fields of the task form (<form id="task-form">) and returns every field's value afterwards.
// Fields it changed get the class "filled-by-ai", so the user sees what to review before submitting.
GatewayTools.register('task_form_fill', {
    execute: function (input) {
        var form = document.getElementById('task-form');
        if (!form) {
            throw new Error('This page has no task form (no <form id="task-form">).');
        }
        var changes = JSON.parse(input);
        var names = Object.keys(changes);
        // Check every field first, so a refused value leaves the form as it was.
        names.forEach(function (name) {
            var field = form.elements.namedItem(name);
            if (!field) {
                throw new Error('The task form has no field "' + name + '".');
            }
            if (field.options && !Array.prototype.some.call(field.options, function (o) { return o.value === changes[name]; })) {
                throw new Error('The field "' + name + '" has no option ' + JSON.stringify(changes[name]) + '.');
            }
        });
        names.forEach(function (name) {
            var field = form.elements.namedItem(name);
            field.value = changes[name];
            field.classList.add('filled-by-ai');
            field.dispatchEvent(new Event('change', {bubbles: true}));
        });
        return GatewayTools.run('task_form_read', '{}');
    }
});
