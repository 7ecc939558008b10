// The PlusWorkflow registration, unchanged: the key is the tool's id; input is the JSON arguments string.
PW.AiTools.register('example-tool', {
    execute: function (input) {
        var inputObj = JSON.parse(input);
        var result = inputObj.exampleParam + " answered";
        return JSON.stringify(result);
    }
});
