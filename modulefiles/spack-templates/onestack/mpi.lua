{% extends "modules/modulefile.lua" %}
{#- The module Spack writes for each MPI of environments/components.yaml
    (its package named in the site environment's modules config, written by
    onestack/spack/environment.py), with one check added: Spack's template
    has no place for it. -#}
{% block footer %}
{{ super() }}
-- A flavor module names the MPI it was built with (ONESTACK_FLAVOR_MPI).
-- Another MPI loaded over it would swap the application's build, but the
-- flavor's mpirun and settings would stay its own MPI's, and the ranks
-- would start as separate one-rank jobs: refused, with the ways that work.
if mode() == "load" then
  local flavor_mpi = os.getenv("ONESTACK_FLAVOR_MPI")
  if flavor_mpi and flavor_mpi ~= myModuleFullName() then
    LmodError("module load " .. myModuleFullName() .. ": a loaded flavor runs on " .. flavor_mpi
      .. ", whose mpirun and settings it keeps. To change MPI, load the flavor built with the other"
      .. " MPI (module spider <app>), or an mpi-runtime/* module of its ABI family")
  end
end
-- Read by the flavor modules: a flavor of another MPI refuses to load after it.
pushenv("ONESTACK_LOADED_MPI", myModuleFullName())
{% endblock %}
