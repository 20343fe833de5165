"""Check every answer before anything is generated.

The rules are local_extensions.RULES, the same that copier's questions apply
(copier.yml): the first broken one is reported in one line that names the
answer, shows the value and says what is allowed. The check runs as
cookiecutter renders this file, in cookiecutter's own process
(local_extensions.stop_at_refusal): a broken rule stops generation there,
cookiecutter removes the partly created output directory, so a rejected
answer leaves nothing behind, and its command ends with that line alone.
"""

{{ cookiecutter | stop_at_refusal }}
