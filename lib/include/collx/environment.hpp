// collx::Environment: MPI initialisation at the thread level collx needs, for applications that
// let collx start MPI.
#pragma once

namespace collx {

class Environment {
 public:
  // Initialises MPI unless it already is: MPI_THREAD_MULTIPLE when COLLX_PROGRESS_THREAD=1
  // (the progress thread calls MPI beside the application), MPI_THREAD_FUNNELED otherwise.
  Environment(int& argc, char**& argv);
  // Finalises MPI if this object initialised it.
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  // The thread level MPI provides.
  int thread_level() const { return thread_level_; }

 private:
  bool owns_mpi_ = false;
  int thread_level_ = 0;
};

}  // namespace collx
